//! A stop signal that sleeping threads notice at once: what `watch`, `hold`
//! and the child of `run` share to end their loops.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// A stop signal that sleeping threads notice at once.
#[derive(Default)]
pub struct Stop {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl Stop {
    /// Asks every thread to stop.
    pub fn stop(&self) {
        if let Ok(mut stopped) = self.stopped.lock() {
            *stopped = true;
        }
        self.wake.notify_all();
    }

    /// True once [`Stop::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.stopped.lock().map(|s| *s).unwrap_or(true)
    }

    /// Sleeps for `duration` or until stopped; true when stopped.
    pub fn sleep(&self, duration: Duration) -> bool {
        let Ok(guard) = self.stopped.lock() else {
            return true;
        };
        self.wake
            .wait_timeout_while(guard, duration, |stopped| !*stopped)
            .map(|(stopped, _)| *stopped)
            .unwrap_or(true)
    }
}
