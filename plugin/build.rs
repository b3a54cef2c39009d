//! On wasm the policy links no std, so nothing brings the C library's
//! `memcmp` and friends, which core calls: they are taken from wasi-libc's
//! static archive (Rust's self-contained copy), whose string functions
//! import nothing.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg=-lc");
        println!("cargo:rustc-link-arg=--export=cabi_realloc");
    }
}
