//! The protocol's JSON Schema, generated from the types requests are decoded into and answers
//! are serialized from: `docs/serve-protocol.schema.json` is this document, and a test fails
//! when the file is not what the types generate.

use schemars::generate::{Contract, SchemaSettings};
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::methods::METHODS;
use crate::protocol::CompactionPending;
use crate::rpc::ErrorObject;

/// The command that writes the schema file from the types.
pub const REGENERATE: &str =
    "cargo run -p ctxhost-serve --example serve-schema > docs/serve-protocol.schema.json";

/// A generator for `contract`; `inline` leaves no `$ref` in what it generates.
fn generator(contract: Contract, inline: bool) -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.contract = contract;
            settings.inline_subschemas = inline;
        })
        .into_generator()
}

/// The JSON Schema of every method's params and result, of the server's notifications and of
/// the error object, as `docs/serve-protocol.schema.json` holds it.
pub fn protocol_schema() -> Value {
    // Params as they are decoded, results as they are serialized (a member left out when it
    // is None is optional in one and not the other).
    let mut params = generator(Contract::Deserialize, false);
    let mut results = generator(Contract::Serialize, false);
    let methods: Map<String, Value> = METHODS
        .iter()
        .map(|entry| {
            let method = json!({
                "params": (entry.params_schema)(&mut params),
                "result": (entry.result_schema)(&mut results),
            });
            (entry.name.to_string(), method)
        })
        .collect();
    let error = results.subschema_for::<ErrorObject>();
    // A notification's schema stands alone: its readers validate it without `$defs`.
    let mut notifications = generator(Contract::Serialize, true);
    let pending = CompactionPending::json_schema(&mut notifications);

    let mut definitions = params.take_definitions(true);
    for (name, schema) in results.take_definitions(true) {
        if let Some(other) = definitions.get(&name) {
            assert_eq!(
                other, &schema,
                "`{name}` is decoded and serialized differently: give the two their own types"
            );
        }
        definitions.insert(name, schema);
    }
    definitions.sort_keys();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": format!("https://ctxhost.dev/schemas/serve-protocol-{}.json", crate::checks::PROTOCOL_VERSION),
        "title": format!("ctxhost serve protocol, version {}", crate::checks::PROTOCOL_VERSION),
        "description": "Params and results of every method of `ctxhost serve` (see serve-protocol.md), generated from the server's types (do not edit: regenerate it). Requests and responses are JSON-RPC 2.0 envelopes around these; `error` is the error object of a response that failed; `notifications` are the server's own messages to the client (JSON-RPC notifications: no id, not answered).",
        "$defs": definitions,
        "methods": methods,
        "error": error,
        "notifications": {
            CompactionPending::METHOD: { "params": pending },
        },
    })
}

/// The schema file's text: the document, pretty-printed, with a final newline.
pub fn protocol_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&protocol_schema()).expect("a schema serializes");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_file_is_what_the_types_generate() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/serve-protocol.schema.json"
        );
        let written = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            written == protocol_schema_text(),
            "{path} is not what the protocol's types generate; regenerate it from the repository's root with\n\n    {REGENERATE}\n"
        );
    }

    #[test]
    fn every_method_has_a_params_and_a_result_schema() {
        let schema = protocol_schema();
        let methods = schema["methods"].as_object().unwrap();
        assert_eq!(methods.len(), METHODS.len());
        for (name, method) in methods {
            for part in ["params", "result"] {
                assert!(method[part].is_object(), "{name} has no {part} schema");
            }
        }
        // Every `$ref` points into `$defs`.
        let text = schema.to_string();
        for reference in text.split("\"$ref\":\"#/$defs/").skip(1) {
            let name = &reference[..reference.find('"').unwrap()];
            assert!(schema["$defs"].get(name).is_some(), "no $defs/{name}");
        }
        let notification = schema["notifications"][CompactionPending::METHOD].to_string();
        assert!(!notification.contains("$ref"), "{notification}");
    }

    #[test]
    fn errors_as_sent_match_the_error_schema() {
        use crate::checks::{Base, base_mismatch};
        use crate::rpc::{RpcError, response};
        use crate::sync::SyncState;
        use serde_json::value::RawValue;

        let schema = protocol_schema();
        let mut error_schema = schema["error"].clone();
        error_schema["$defs"] = schema["$defs"].clone();
        let validator = jsonschema::validator_for(&error_schema).unwrap();
        let base = Base {
            message_count: 2,
            last_fingerprint: None,
            chain: None,
        };
        let mirror = SyncState {
            message_count: 3,
            last_fingerprint: Some("f3".into()),
            chain: Some("c3".into()),
        };
        let errors = [
            RpcError::unknown_session("s"),
            base_mismatch(&base, &mirror),
            crate::methods::parse("session.sync", &RawValue::from_string("{}".into()).unwrap())
                .err()
                .unwrap(),
            RpcError::from(ctxhost::Error::ToolCall {
                tool: "ctx_search".into(),
                problem: "`query` is required".into(),
            }),
        ];
        for error in errors {
            let line: Value = serde_json::from_str(&response(RawValue::NULL, Err(error))).unwrap();
            let sent = &line["error"];
            if let Err(e) = validator.validate(sent) {
                panic!("{sent} does not match the error schema: {e}");
            }
        }
    }
}
