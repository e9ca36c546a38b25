//! Writes a generated coding-agent session to stdout, to replay or report on:
//! `cargo run -p ctxhost-transcript --example generate -- SEED MESSAGES [SHAPE] > session.jsonl`.
//! SHAPE is `outside-parent` (its first entry's parent not in the file, as a continued
//! OpenClaw session; the benchmarks' parent id) or `v1` (version 1, no ids); the benchmarks'
//! 1 GB shapes are seed 7, 760000 messages.

fn main() {
    let mut args = std::env::args().skip(1);
    let mut number = |default: u64| {
        args.next()
            .map_or(Ok(default), |a| a.parse::<u64>())
            .unwrap_or_else(|e| {
                eprintln!("usage: generate [SEED] [MESSAGES] [outside-parent|v1]: {e}");
                std::process::exit(2)
            })
    };
    let seed = number(1);
    let messages = number(2_000) as usize;
    let session = ctxhost_transcript::generate::coding_session(seed, messages);
    use ctxhost_transcript::generate::{to_v1, with_outside_parent};
    let shaped = match args.next().as_deref() {
        None => session,
        Some("outside-parent") => with_outside_parent(&session, "0ffc0ffe"),
        Some("v1") => to_v1(&session),
        Some(other) => {
            eprintln!("usage: generate [SEED] [MESSAGES] [outside-parent|v1]: no shape {other}");
            std::process::exit(2)
        }
    };
    print!("{shaped}");
}
