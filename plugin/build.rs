//! On wasm the policy links no std, so wasi-libc (Rust's self-contained
//! copy) is linked by hand for what std would have brought: `memcmp` and the
//! other string functions core calls, malloc (the policy's allocator, in
//! `src/lib.rs`), and `cabi_realloc` over that malloc, exported for the
//! host's canonical ABI. None of these import anything.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg=-lc");
        println!("cargo:rustc-link-arg=--export=cabi_realloc");
    }
}
