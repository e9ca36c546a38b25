//! The `ctxhost` command: operators' view of engines, sessions and replays.

// `println!` / `eprintln!` panic (exit 101) when the reader closed the pipe; cli::output's
// `stdout_line!` / `stderr_line!` do not.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
