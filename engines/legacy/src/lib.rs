//! The bundled `legacy` context engine: what an agent runtime does without a context engine.
//!
//! `assemble` passes the whole context through as one `keep-range` item (the plan is one item
//! whatever the context's length; the guest only sums the entries' tokens), `ingest` keeps
//! nothing, and `compact` delegates to the host's built-in compaction, which picks its layer
//! from what this engine said it sends. All of that is the SDK's default behaviour (contract
//! 0.2); this engine only names itself.

use ctxhost_sdk::{ContextEngine, EngineInfo};

/// The pass-through engine. Stateless.
#[derive(Debug, Default)]
pub struct Legacy;

impl ContextEngine for Legacy {
    fn info() -> EngineInfo {
        EngineInfo::new("legacy", "Legacy (pass-through)", env!("CARGO_PKG_VERSION"))
    }
}

ctxhost_sdk::export_engine!(Legacy);

#[cfg(test)]
mod tests {
    use super::*;
    use ctxhost_sdk::{AssembleRequest, ContextEntry, ContextItem, KeepRange, Role, Session};

    #[test]
    fn info_names_the_engine() {
        let info = Legacy::info();
        assert_eq!(info.id, "legacy");
        assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
        assert!(!info.owns_compaction);
    }

    #[test]
    fn assemble_passes_everything_through() {
        let entries = [
            (0, Role::CompactionSummary, 40),
            (3, Role::User, 2),
            (4, Role::Assistant, 7),
        ]
        .map(|(entry, role, tokens)| ContextEntry::new(entry, role, tokens));
        let request = AssembleRequest {
            session: Session {
                id: "s".into(),
                key: "agent:main:main".into(),
            },
            token_budget: Some(10),
            context_window: 128_000,
            context_tokens: 49,
            available_tools: vec![],
            entries: entries.to_vec().into(),
            model: None,
            prompt: None,
        };
        let result = Legacy.assemble(request).unwrap();
        // Every entry, from the summary to the last, in the request's order.
        assert_eq!(
            result.items,
            [ContextItem::KeepRange(KeepRange { first: 0, last: 4 })]
        );
        assert_eq!(result.estimated_tokens, 49);
        assert_eq!(result.system_prompt_addition, None);
    }
}
