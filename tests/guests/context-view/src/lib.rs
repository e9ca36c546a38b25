//! A test engine that shows what the SDK hands it. `assemble` keeps nothing and inserts one
//! custom message (`customType` `context-view`) whose text is the whole context as the engine
//! sees it: the token total, then one line per entry, `entry role tokens tool is_error pruned`
//! (`-` for no tool). Since contract 0.4 the SDK builds that view from the rows the host sent
//! since the last call; a test compares it with the host's own context after each step.

use ctxhost_sdk::{AssembleRequest, AssembleResult, ContextEngine, EngineInfo, Plan, Result};

/// Keeps nothing of its own: the view is the SDK's.
#[derive(Default)]
pub struct ContextView;

impl ContextEngine for ContextView {
    fn info() -> EngineInfo {
        EngineInfo::new("context-view", "Context view", env!("CARGO_PKG_VERSION"))
    }

    fn assemble(&mut self, request: AssembleRequest) -> Result<AssembleResult> {
        let mut view = format!("total {}", request.entries.total_tokens());
        for e in request.entries.iter() {
            view.push_str(&format!(
                "\n{} {} {} {} {} {}",
                e.entry,
                e.role.as_str(),
                e.tokens,
                e.tool_name.as_deref().unwrap_or("-"),
                u8::from(e.is_error),
                u8::from(e.pruned)
            ));
        }
        Ok(Plan::new().insert_custom("context-view", &view).build())
    }
}

ctxhost_sdk::export_engine!(ContextView);
