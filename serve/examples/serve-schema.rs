//! Prints the JSON Schema of the `ctxhost serve` protocol, generated from the server's types:
//! `cargo run -p ctxhost-serve --example serve-schema > docs/serve-protocol.schema.json`.

fn main() {
    print!("{}", ctxhost_serve::protocol_schema_text());
}
