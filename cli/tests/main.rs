//! The `ctxhost` command's tests, one module per command or concern, each running the binary as
//! an operator or an agent's bridge runs it. One test binary: eleven were eleven links of the
//! library and 0.4 GB of a clean `cargo test`.

mod common;

mod cli;
mod config_cli;
mod context_cli;
mod plugins_cli;
mod report_cli;
mod serve;
mod serve_chain;
mod serve_disk_faults;
mod serve_engine_choice;
mod serve_limits;
mod serve_order;
