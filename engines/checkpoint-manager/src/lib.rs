//! Being written: the checkpoint-manager engine.
use ctxhost_sdk::{ContextEngine, EngineInfo};

#[derive(Default)]
pub struct CheckpointManager;

impl ContextEngine for CheckpointManager {
    fn info() -> EngineInfo {
        EngineInfo::new("checkpoint-manager", "Checkpoint manager", env!("CARGO_PKG_VERSION"))
    }
}

ctxhost_sdk::export_engine!(CheckpointManager);
