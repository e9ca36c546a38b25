//! The `ctxhost` command: operators' view of engines, sessions and replays.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
