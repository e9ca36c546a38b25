//! What the host knows about an engine before loading it: where it came from, its state dir,
//! its config, and the limits and grants its instances run under.

use std::path::PathBuf;

use super::limits::Limits;
use super::state::Grants;

/// What the host knows about an engine before loading it.
#[derive(Debug, Clone)]
pub struct EngineSpec {
    /// The id the operator selects it by.
    pub id: String,
    /// Where it came from, for messages (a path, or `bundled:legacy`).
    pub origin: String,
    /// Its private directory, preopened read-write as `/`.
    pub state_dir: PathBuf,
    /// Its configuration as a JSON object.
    pub config_json: String,
    /// Resource limits of each instance (`plugins.entries.<id>.limits` over the defaults).
    pub limits: Limits,
    /// Capabilities both the manifest asks for and the operator granted.
    pub grants: Grants,
}
