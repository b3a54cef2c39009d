//! The async runtime the network backends (object stores, SFTP, rclone) run
//! their requests on, and the one way a synchronous [`super::Backend`] call
//! waits for one: with a deadline, after which the request is dropped (its
//! connection closed) and the call fails.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::runtime::Runtime;

use super::BackendError;

/// Worker threads: the requests are I/O; two threads keep a slow answer
/// from delaying the timers of the others.
const WORKERS: usize = 2;

/// The process's one I/O runtime, made on first use.
fn runtime() -> Result<&'static Runtime, BackendError> {
    static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(WORKERS)
                .thread_name("lockwarden-io")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| BackendError::Other(format!("cannot start the I/O runtime: {e}")))
}

/// Runs `future` to completion on the I/O runtime, from a thread outside
/// it. After `timeout` the future is dropped and the call fails with a
/// message that starts with `what` (which must hold no secret).
pub fn within<T>(
    timeout: Duration,
    what: impl FnOnce() -> String,
    future: impl Future<Output = Result<T, BackendError>>,
) -> Result<T, BackendError> {
    let runtime = runtime()?;
    match deadline(runtime, timeout, future) {
        Some(result) => result,
        None => Err(no_answer(&what(), timeout)),
    }
}

/// Runs `future` on the I/O runtime for at most `timeout`, from a thread
/// outside it: its output, or `None` when it had none in time (it is then
/// dropped). For callers whose errors are not a backend's; an `Err` says
/// the runtime could not be started.
pub fn run_for<T>(timeout: Duration, future: impl Future<Output = T>) -> Result<Option<T>, String> {
    let runtime = runtime().map_err(|e| e.to_string())?;
    Ok(deadline(runtime, timeout, future))
}

fn deadline<T>(runtime: &Runtime, timeout: Duration, future: impl Future<Output = T>) -> Option<T> {
    // The timer must be made inside the runtime: `timeout` registers it
    // with the runtime's clock.
    runtime
        .block_on(async { tokio::time::timeout(timeout, future).await })
        .ok()
}

/// The error of an operation (`what`) that got no answer within `timeout`.
pub fn no_answer(what: &str, timeout: Duration) -> BackendError {
    BackendError::Other(format!(
        "{what}: no answer within {} (--timeout); nothing after it was done",
        lockwarden_duration::format(i64::try_from(timeout.as_nanos()).unwrap_or(i64::MAX))
    ))
}

/// Spawns `future` on the I/O runtime (a connection's driver, say); it runs
/// until it ends or the process does.
pub fn spawn(future: impl Future<Output = ()> + Send + 'static) -> Result<(), BackendError> {
    runtime()?.spawn(future);
    Ok(())
}

/// Enters the I/O runtime for the duration of `f`, for APIs that must be
/// called from inside one (spawning a child process with tokio, say).
pub fn enter<T>(f: impl FnOnce() -> T) -> Result<T, BackendError> {
    let _guard = runtime()?.enter();
    Ok(f())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_future_that_never_ends_fails_at_its_deadline() {
        let result: Result<(), _> = within(
            Duration::from_millis(50),
            || "listing locks/ at s3:host/bucket".into(),
            std::future::pending(),
        );
        let err = result.expect_err("never answers");
        assert!(matches!(err, BackendError::Other(_)), "{err:?}");
        assert!(
            err.to_string()
                .starts_with("listing locks/ at s3:host/bucket"),
            "{err}"
        );
    }

    #[test]
    fn many_threads_wait_at_once() {
        let results: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8u64)
                .map(|i| {
                    scope.spawn(move || {
                        within(Duration::from_secs(5), String::new, async move {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            Ok(i)
                        })
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().ok()).collect()
        });
        let sum: u64 = results.into_iter().flatten().flatten().sum();
        assert_eq!(sum, (0..8).sum::<u64>());
    }
}
