//! The documented shapes of the commands' `--json` output. Each is a type deriving
//! `JsonSchema`; `docs/cli-json/<command>.schema.json` is what it generates, and a test fails
//! when a type changes without its file. To write the files anew after a deliberate change:
//! `CTXHOST_BLESS=1 cargo test -p ctxhost-cli json_schema`.

use schemars::JsonSchema;
use schemars::generate::{Contract, SchemaSettings};
use serde_json::Value;

/// A command's schema file name (`<name>.schema.json`) and what writes its schema.
type Command = (&'static str, fn() -> Value);

/// Every command with a documented `--json` shape.
pub(super) const COMMANDS: &[Command] = &[
    ("plugins-list", schema_of::<super::plugins::PluginsList>),
    ("doctor", schema_of::<super::doctor::Report>),
    ("compact", schema_of::<CompactOutput>),
    ("context-status", schema_of::<super::context::StatusReport>),
    (
        "context-history",
        schema_of::<super::context::HistoryReport>,
    ),
    (
        "context-inspect",
        schema_of::<super::context::InspectReport<'static>>,
    ),
    ("context-search", schema_of::<super::recall::SearchReport>),
    ("context-expand", schema_of::<super::recall::ExpandReport>),
    ("config-show", schema_of::<ctxhost::config::show::Effective>),
    ("context-export", schema_of::<super::context::ExportReport>),
    ("context-import", schema_of::<super::context::ImportReport>),
    ("replay", schema_of::<ctxhost::replay::ReplayReport>),
    ("report", schema_of::<ctxhost_report::Report>),
    ("demo", schema_of::<super::demo::DemoOutput>),
];

/// `compact --json` writes one of three shapes: a dry run (`dryRun`), nothing to compact, or
/// what the compaction did (`compacted`). Only its schema is used.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum CompactOutput {
    DryRun(super::compact::DryRun),
    NothingToCompact(super::compact::NothingToCompact),
    Compacted(Box<super::compact::Compacted>),
}

/// The schema of what `T` serializes to, standing alone (its types in its own `$defs`).
fn schema_of<T: JsonSchema>() -> Value {
    SchemaSettings::draft2020_12()
        .with(|settings| settings.contract = Contract::Serialize)
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value()
}

/// A schema file's text: pretty-printed, with a final newline.
#[cfg(test)]
fn text_of(schema: &Value) -> String {
    let mut text = serde_json::to_string_pretty(schema).expect("a schema serializes");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/cli-json");

    #[test]
    fn json_schema_files_are_what_the_types_generate() {
        let bless = std::env::var_os("CTXHOST_BLESS").is_some();
        let mut stale = Vec::new();
        for (command, schema) in COMMANDS {
            let path = format!("{DIR}/{command}.schema.json");
            let generated = text_of(&schema());
            if bless {
                std::fs::create_dir_all(DIR).unwrap();
                std::fs::write(&path, &generated).unwrap();
            } else if std::fs::read_to_string(&path).unwrap_or_default() != generated {
                stale.push(path);
            }
        }
        assert!(
            stale.is_empty(),
            "not what the output types generate: {stale:?}; write them anew with\n\n    CTXHOST_BLESS=1 cargo test -p ctxhost-cli json_schema\n"
        );
    }

    #[test]
    fn every_command_with_json_output_has_a_schema() {
        // Walks the command tree: a command that gains `--json` without a documented shape
        // fails here, not in a user's parser.
        fn walk(command: &clap::Command, path: &mut Vec<String>, found: &mut Vec<String>) {
            if command.get_arguments().any(|a| a.get_id() == "json") {
                found.push(path.join("-"));
            }
            for sub in command.get_subcommands() {
                path.push(sub.get_name().to_string());
                walk(sub, path, found);
                path.pop();
            }
        }
        let mut found = Vec::new();
        walk(
            &<super::super::Cli as clap::CommandFactory>::command(),
            &mut Vec::new(),
            &mut found,
        );
        found.sort();
        let mut documented: Vec<String> = COMMANDS.iter().map(|(c, _)| c.to_string()).collect();
        documented.sort();
        assert_eq!(found, documented);
    }

    #[test]
    fn no_schema_lets_a_rust_wrapper_through() {
        // `{"Ok": …}` / `{"Err": …}` are serde's defaults for a Result, never a documented shape.
        for (command, schema) in COMMANDS {
            let text = schema().to_string();
            for wrapper in ["\"Ok\"", "\"Err\""] {
                assert!(!text.contains(wrapper), "{command}: {wrapper} in {text}");
            }
        }
    }
}
