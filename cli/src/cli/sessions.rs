//! What the commands that read a session share: the `--session` flag and how its value names a
//! session, loading its transcript, and a scratch directory for replays that keep nothing.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use ctxhost::transcript::Transcript;
use ctxhost::{Host, SessionTarget};

use super::output::stderr_line;

/// A `--session` value: an existing file or anything that looks like a path is a path;
/// otherwise a key under `$CTXHOST_HOME/sessions/`.
pub(super) fn target(session: &str) -> SessionTarget {
    let path = Path::new(session);
    if path.exists() || session.contains('/') || session.ends_with(".jsonl") {
        SessionTarget::Path(path.to_path_buf())
    } else {
        SessionTarget::Key(session.to_string())
    }
}

/// `--session` of the commands that read an existing session.
#[derive(clap::Args)]
pub(super) struct SessionFlag {
    /// A transcript path, or a session key under $CTXHOST_HOME/sessions/.
    #[arg(long = "session", value_name = "SESSION")]
    pub(super) key_or_path: String,
}

impl SessionFlag {
    /// The session's target and transcript file, which must exist.
    pub(super) fn existing(&self, host: &Host) -> anyhow::Result<(SessionTarget, PathBuf)> {
        let target = target(&self.key_or_path);
        let (_, path) = host.session_path(&target)?;
        if !path.is_file() {
            anyhow::bail!("no session transcript at {}", path.display());
        }
        Ok((target, path))
    }
}

/// The transcript at `path`, what loading it found printed as warnings.
pub(super) fn load_transcript(path: &Path) -> anyhow::Result<Transcript> {
    let t = Transcript::load(path)?;
    for w in ctxhost_transcript::shown_warnings(t.warnings()) {
        stderr_line!("warning: {w}");
    }
    Ok(t)
}

/// A directory that lives as long as the value (for replays that keep nothing).
pub(super) fn scratch_dir() -> anyhow::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix("ctxhost-")
        .tempdir()
        .context("cannot create a scratch directory")
}
