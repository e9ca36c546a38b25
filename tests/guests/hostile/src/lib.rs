//! Being written: a hostile engine for the sandbox suite.
use ctxhost_sdk::{ContextEngine, EngineInfo};

#[derive(Default)]
pub struct Hostile;

impl ContextEngine for Hostile {
    fn info() -> EngineInfo {
        EngineInfo::new("hostile", "Hostile", env!("CARGO_PKG_VERSION"))
    }
}

ctxhost_sdk::export_engine!(Hostile);
