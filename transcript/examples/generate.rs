//! Writes a generated coding-agent session to stdout, to replay or report on:
//! `cargo run -p ctxhost-transcript --example generate -- SEED MESSAGES > session.jsonl`.

fn main() {
    let mut args = std::env::args().skip(1);
    let mut number = |default: u64| {
        args.next()
            .map_or(Ok(default), |a| a.parse::<u64>())
            .unwrap_or_else(|e| {
                eprintln!("usage: generate [SEED] [MESSAGES]: {e}");
                std::process::exit(2)
            })
    };
    let seed = number(1);
    let messages = number(2_000) as usize;
    print!(
        "{}",
        ctxhost_transcript::generate::coding_session(seed, messages)
    );
}
