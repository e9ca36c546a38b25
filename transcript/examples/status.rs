//! `context status` without the CLI around it, to time the scan alone:
//! `cargo run --release -p ctxhost-transcript --example status -- FILE` prints the status's
//! figures, its first warning and how long the scan took.

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: status FILE");
        std::process::exit(2)
    };
    let started = std::time::Instant::now();
    match ctxhost_transcript::status::scan(std::path::Path::new(&path)) {
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
