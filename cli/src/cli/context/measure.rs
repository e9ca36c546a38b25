//! How the `context` commands measure a context: the method `status` names, and the prompt
//! settings both `status` and `inspect` count the system prompt with.

use std::path::PathBuf;

use ctxhost::Host;
use ctxhost::prompt::PromptSettings;

/// How `context status` (and the transcript's `context_tokens`) measures a context, named in
/// both `status` and `inspect` so their figures are never mistaken for one another.
pub(super) const RECORDED_METHOD: &str = "recorded-usage";
pub(super) const RECORDED_METHOD_TEXT: &str = "recorded usage (the last assistant turn's usage + chars/4 of later messages; chars/4 of all without usage)";

/// The prompt settings of the config, with `--workspace` taking precedence.
pub(super) fn prompt_settings(host: &Host, workspace: Option<PathBuf>) -> PromptSettings {
    let mut settings = PromptSettings::from_config(&host.config().settings.agents.defaults);
    if workspace.is_some() {
        settings.workspace = workspace;
    }
    settings
}
