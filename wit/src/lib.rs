//! The `lockwarden:policy` contract: the WIT package in `wit/` (which hosts
//! and policies generate their bindings from) and its version, written here
//! once for every Rust host and policy.

/// The WIT package, as text.
pub const WIT: &str = include_str!("../policy.wit");

/// The contract version: the version of the WIT package `lockwarden:policy`.
pub const VERSION: &str = "0.1.0";

#[cfg(test)]
mod tests {
    #[test]
    fn the_version_is_the_packages() {
        let package = format!("package lockwarden:policy@{};", super::VERSION);
        assert!(
            super::WIT.contains(&package),
            "policy.wit declares another version"
        );
    }
}
