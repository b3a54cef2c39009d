//! The epoch ticker: advances the engine's epoch every 10 ms while some store
//! exists, so that epoch deadlines measure wall time, and sleeps otherwise, so
//! that an idle `watch` costs no wake-ups.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::Duration;

use wasmtime::Engine;

/// How often the epoch advances; deadlines are counted in these.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Shared between the runtime and its ticker thread.
#[derive(Default)]
pub struct Ticker {
    active: AtomicUsize,
    thread: OnceLock<Thread>,
}

/// Keeps the epoch ticking while it lives; each store holds one.
pub struct Ticking(Arc<Ticker>);

impl Ticker {
    /// Starts the thread for `engine`; it ends once the engine is dropped.
    pub fn start(engine: &Engine) -> Arc<Ticker> {
        let ticker = Arc::new(Ticker::default());
        let weak = engine.weak();
        let shared = ticker.clone();
        let thread = std::thread::Builder::new()
            .name("lockwarden-epoch".into())
            .spawn(move || {
                while let Some(engine) = weak.upgrade() {
                    let busy = shared.active.load(Ordering::SeqCst) > 0;
                    if busy {
                        engine.increment_epoch();
                    }
                    drop(engine);
                    if busy {
                        std::thread::sleep(EPOCH_TICK);
                    } else {
                        // Woken by `ticking`; the timeout notices a dropped engine.
                        std::thread::park_timeout(Duration::from_secs(1));
                    }
                }
            })
            .unwrap_or_else(|e| panic!("cannot start the epoch thread: {e}"));
        let _ = ticker.thread.set(thread.thread().clone());
        ticker
    }

    /// Ticks until the returned guard is dropped.
    pub fn ticking(self: &Arc<Self>) -> Ticking {
        self.active.fetch_add(1, Ordering::SeqCst);
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
        Ticking(self.clone())
    }
}

impl Drop for Ticking {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}
