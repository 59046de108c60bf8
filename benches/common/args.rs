//! The command-line piece every bench with a report of its own shares (clap): the flag
//! cargo passes. Each bench flattens [`Cargo`] into its own `#[derive(Parser)]` struct, so
//! `--help` lists that bench's options and a misspelt one is an error, not ignored.
//!
//! Included with `#[path = "common/args.rs"] mod args;` (the benches with their own report
//! do not use the criterion helpers of `common/mod.rs`).

/// What cargo itself passes to a bench binary.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct Cargo {
    /// Passed by `cargo bench`; absent under `cargo test --benches` and in a bare run.
    #[arg(long, hide = true)]
    pub bench: bool,
}
