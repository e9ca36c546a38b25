//! The `ctxhost` command: operators' view of engines, sessions and replays.

// `println!` / `eprintln!` panic (exit 101) when the reader closed the pipe; cli::output's
// `stdout_line!` / `stderr_line!` do not.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod cli;

/// Loading a transcript builds many small values: mimalloc loads a 210 MB session in 60% of
/// the system allocator's time and a precompiled engine in 70% (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
