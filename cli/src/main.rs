//! The `ctxhost` command: operators' view of engines, sessions and replays.

// `println!` / `eprintln!` panic (exit 101) when the reader closed the pipe; cli::output's
// `stdout_line!` / `stderr_line!` do not.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod cli;

/// Loading a transcript or a precompiled engine builds many small values: with mimalloc a
/// 210 MB session loads in about three quarters of the system allocator's time and an engine
/// in 70% (BENCHMARKS.md, "Slots kept warm, another allocator, a pipe watched").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
