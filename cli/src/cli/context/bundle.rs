//! `context export` / `context import`: a portable bundle of a session's context, and a fresh
//! session started from one.

use std::path::PathBuf;

use ctxhost::bundle::ContextBundle;
use ctxhost::{Host, SessionTarget};
use schemars::JsonSchema;
use serde::Serialize;

use crate::cli::output::{Bar, Report};
use crate::cli::sessions::{SessionFlag, load_transcript, target};

/// `context export`.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ExportReport {
    session: String,
    bundle: String,
    entries: usize,
    has_summary: bool,
    has_checkpoint: bool,
}

pub(super) fn export(
    host: &Host,
    session: &SessionFlag,
    file: PathBuf,
) -> anyhow::Result<ExportReport> {
    let window = host.compaction_settings().context_window;
    let (_, path) = session.existing(host)?;
    let t = load_transcript(&path)?;
    let bundle = ContextBundle::export(&t, &path, window);
    bundle.write(&file)?;
    Ok(ExportReport {
        session: path.display().to_string(),
        bundle: file.display().to_string(),
        entries: bundle.entries.len(),
        has_summary: bundle.summary.is_some(),
        has_checkpoint: bundle.checkpoint.is_some(),
    })
}

impl Report for ExportReport {
    fn lines(&self) -> Vec<String> {
        vec![format!(
            "exported {} entries{} from {} to {}",
            self.entries,
            if self.has_summary {
                " and the latest summary"
            } else {
                ""
            },
            self.session,
            self.bundle
        )]
    }
}

/// `context import`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ImportReport {
    session: String,
    path: String,
    entries: usize,
    #[serde(skip)]
    bundle: String,
}

pub(super) fn import(
    host: &Host,
    file: PathBuf,
    session: Option<&str>,
) -> anyhow::Result<ImportReport> {
    let name = file.display().to_string();
    let bundle = ContextBundle::read(&file)?;
    let session_id = uuid::Uuid::new_v4().to_string();
    let target = match session {
        Some(session) => target(session),
        None => SessionTarget::Key(format!("imported-{}", &session_id[..8])),
    };
    let (key, path) = host.session_path(&target)?;
    let bar = Bar::spinner("importing");
    let entries = bundle.create_session(&path, &session_id, &name);
    bar.finish();
    Ok(ImportReport {
        session: key,
        path: path.display().to_string(),
        entries: entries?,
        bundle: name,
    })
}

impl Report for ImportReport {
    fn lines(&self) -> Vec<String> {
        vec![format!(
            "imported {} into a fresh session `{}` ({}, {} entries)",
            self.bundle, self.session, self.path, self.entries
        )]
    }
}
