//! The `lockwarden:policy` contract: the WIT packages in `wit/` (which hosts
//! and policies generate their bindings from) and their versions, written
//! here once for every Rust host and policy.

#![cfg_attr(not(test), no_std)]

/// The current contract's WIT package, as text (`wit/policy.wit`).
pub const WIT: &str = include_str!("../policy.wit");

/// The current contract version: the version of the WIT package
/// `lockwarden:policy` in `wit/policy.wit`.
pub const VERSION: &str = "0.2.0";

/// Contract 0.1.0 (`wit/0.1.0/policy.wit`), which hosts still run: policies
/// built against it keep loading, without the facts 0.2.0 added.
pub mod v0_1 {
    /// Its WIT package, as text.
    pub const WIT: &str = include_str!("../0.1.0/policy.wit");
    /// Its version.
    pub const VERSION: &str = "0.1.0";
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_version_is_its_packages() {
        for (wit, version) in [
            (super::WIT, super::VERSION),
            (super::v0_1::WIT, super::v0_1::VERSION),
        ] {
            let package = format!("package lockwarden:policy@{version};");
            assert!(
                wit.contains(&package),
                "a WIT file declares another version than {version}"
            );
        }
    }
}
