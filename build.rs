//! Enables the AVX-512F build of the CPU loop nests (`src/backends/cpu/loopnest.rs`) where
//! the compiler accepts `#[target_feature(enable = "avx512f")]`, stable from Rust 1.89 (the
//! crate's minimum is 1.80).

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-check-cfg=cfg(skel_avx512)");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    // "rustc 1.95.0 (59807616e 2026-04-14)": the minor version
    let minor = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|v| {
            v.split_whitespace()
                .nth(1)?
                .split('.')
                .nth(1)?
                .parse::<u32>()
                .ok()
        });
    if minor.is_some_and(|m| m >= 89) {
        println!("cargo:rustc-cfg=skel_avx512");
    }
}
