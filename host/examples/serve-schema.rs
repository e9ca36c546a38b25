//! Prints the JSON Schema of the `ctxhost serve` protocol, generated from the server's types:
//! `cargo run -p ctxhost --example serve-schema > docs/serve-protocol.schema.json`.

fn main() {
    print!("{}", ctxhost::serve::protocol_schema_text());
}
