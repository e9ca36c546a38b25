//! `context status` without the CLI around it, to time the scan alone:
//! `cargo run --release -p ctxhost-transcript --example status -- [--remember DIR] FILE`
//! prints the status's figures, its first warning and how long the scan took. With
//! `--remember DIR` the check's records are kept in DIR (as `context status` keeps them), so
//! a second run on the same file checks only what was appended since.

use std::path::Path;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (remember, path) = match args.as_slice() {
        [path] => (None, path),
        [flag, dir, path] if flag == "--remember" => (Some(dir), path),
        _ => {
            eprintln!("usage: status [--remember DIR] FILE");
            std::process::exit(2)
        }
    };
    let started = std::time::Instant::now();
    let path = Path::new(path);
    let status = match remember {
        Some(dir) => ctxhost_transcript::status::scan_remembering(path, u64::MAX, dir.as_ref()),
        None => ctxhost_transcript::status::scan(path),
    };
    match status {
        Ok(s) => {
            if let Some(first) = s.warnings.first() {
                println!("first warning: {first}");
            }
            println!(
                "{} tokens, {} messages, {} compactions ({}), {} warnings, {:.3} s",
                s.context_tokens,
                s.context_messages,
                s.compaction_count,
                s.count_source.as_str(),
                s.warnings.len(),
                started.elapsed().as_secs_f64()
            )
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1)
        }
    }
}
