//! Tells the tests whether the machine that builds them has AVX-512F.
//!
//! The matrix kernel and everything built on it need AVX-512F; on a CPU without it their tests
//! cannot run. Rust's test harness has no run-time skip, so the build script sets `host_avx512`
//! and those tests carry `#[cfg_attr(not(host_avx512), ignore = "...")]`: `cargo test` then
//! lists them as ignored, with the reason, instead of passing them having checked nothing.
//! Tests are built and run on the same machine here (no cross-compilation), so the build
//! machine's CPU is the test machine's.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(host_avx512)");
    println!("cargo::rerun-if-changed=build.rs");
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    if std::arch::is_x86_feature_detected!("avx512f") {
        println!("cargo::rustc-cfg=host_avx512");
    }
}
