//! Reading what `watch` serves on its metrics address.

use std::time::{Duration, Instant};

/// Reads `http://ADDR/metrics` until `ready` holds of the text, and returns
/// it; panics with the last text after 60 s.
pub fn scrape_until(addr: &str, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(mut response) = ureq::get(&format!("http://{addr}/metrics")).call() {
            last = response.body_mut().read_to_string().unwrap_or_default();
            if ready(&last) {
                return last;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("metrics never got there on {addr}:\n{last}");
}
