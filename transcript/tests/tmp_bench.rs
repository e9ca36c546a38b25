use std::time::Instant;
#[test]
fn bench() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/data/pi-large-session.jsonl"
    ))
    .unwrap();
    let mut best = u128::MAX;
    for _ in 0..30 {
        let s = Instant::now();
        let t = ctxhost_transcript::Transcript::parse(&text, "x").unwrap();
        best = best.min(s.elapsed().as_micros());
        std::hint::black_box(t);
    }
    let mut best_raw = u128::MAX;
    for _ in 0..30 {
        let s = Instant::now();
        let mut n = 0;
        for l in text.lines() {
            let v: serde::de::IgnoredAny = serde_json::from_str(l).unwrap();
            std::hint::black_box(v);
            n += 1;
        }
        best_raw = best_raw.min(s.elapsed().as_micros());
        std::hint::black_box(n);
    }
    let mut best_v = u128::MAX;
    for _ in 0..10 {
        let s = Instant::now();
        for l in text.lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            std::hint::black_box(v);
        }
        best_v = best_v.min(s.elapsed().as_micros());
    }
    let t = ctxhost_transcript::Transcript::parse(&text, "x").unwrap();
    let mut best_ctx = u128::MAX;
    for _ in 0..30 {
        let s = Instant::now();
        std::hint::black_box(t.context_tokens());
        std::hint::black_box(t.context());
        best_ctx = best_ctx.min(s.elapsed().as_nanos());
    }
    println!(
        "parse {best}us  ignored-any scan {best_raw}us  Value {best_v}us ctx+tokens {best_ctx}ns"
    );
}
