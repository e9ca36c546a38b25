//! Where a session key's transcript lives and how a new one starts: the key as a file name
//! (lossless, or a stable short form for long keys, whose transcript then records the key).

use std::path::{Path, PathBuf};

use ctxhost_transcript::Transcript;

use crate::error::{Error, Result};

/// Where a session key's transcript lives under `sessions/`: keys of the form
/// `agent:<agent>:...` (OpenClaw's) under `agents/<agent>/`, others directly; the key itself
/// `%`-encoded into the file name, or its short form when that would be too long (a prefix
/// and a hash of the key, which the transcript records whole).
pub fn session_file(sessions_dir: &Path, key: &str) -> Result<PathBuf> {
    let agent = key
        .strip_prefix("agent:")
        .and_then(|rest| rest.split_once(':'))
        .map(|(agent, _)| agent)
        .filter(|agent| !agent.is_empty());
    let dir = match agent {
        Some(agent) => sessions_dir.join("agents").join(file_stem(agent)?),
        None => sessions_dir.to_path_buf(),
    };
    let plain = format!("{}.jsonl", encode_key(key)?);
    let stem = file_stem(key)?;
    // A long name written before short forms existed stays where it is.
    if stem.len() + ".jsonl".len() != plain.len() && dir.join(&plain).exists() {
        return Ok(dir.join(plain));
    }
    Ok(dir.join(format!("{stem}.jsonl")))
}

/// The longest file stem a key is written as: with `.jsonl` and the longest suffix a sibling
/// file adds (`.recall.sqlite-journal`, `.torn-<time>`, `.tmp-<pid>-<n>`) it stays well under
/// the 255-byte name limit of common filesystems.
const MAX_STEM_BYTES: usize = 180;

/// How much of the encoded key a short form keeps, for people listing the directory.
const SHORT_PREFIX_BYTES: usize = 120;

/// Marks a short form: `~` is never part of an encoded key, so the two cannot collide.
const SHORT_FORM_MARK: char = '~';

/// A key as a file (or directory) name: [`encode_key`], or, when that is longer than
/// [`MAX_STEM_BYTES`] (percent-encoding triples each non-ASCII byte, so a 200-byte key can
/// need 600), a stable short form: the encoding's start, `~`, and 32 hex digits of the key's
/// BLAKE3 hash. The session records its full key inside (see [`KEY_RECORD`]).
pub(crate) fn file_stem(key: &str) -> Result<String> {
    let plain = encode_key(key)?;
    if plain.len() <= MAX_STEM_BYTES {
        return Ok(plain);
    }
    // Cut before a `%XX` triple rather than inside it.
    let mut cut = SHORT_PREFIX_BYTES;
    while cut > 0 && plain.as_bytes()[cut - 2..cut].contains(&b'%') {
        cut -= 1;
    }
    let hash = blake3::hash(key.as_bytes()).to_hex();
    Ok(format!("{}{SHORT_FORM_MARK}{}", &plain[..cut], &hash[..32]))
}

/// `customType` of the entry that records the full key of a session whose file name is a short
/// form, written first in the transcript.
pub(crate) const KEY_RECORD: &str = "ctxhost.sessionKey";

/// A new transcript for `key` at `path`: its header, and the full key recorded inside when the
/// file name is a short form of it (nothing else could tell which key the file belongs to).
pub fn new_transcript(id: &str, key: &str, path: &Path) -> Result<Transcript> {
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let now = crate::timestamp::now_iso();
    let mut transcript = Transcript::new(id, &cwd, &now);
    let short = path
        .file_stem()
        .is_some_and(|stem| stem.to_string_lossy().contains(SHORT_FORM_MARK));
    if short {
        let record = serde_json::json!({ "customType": KEY_RECORD, "data": { "sessionKey": key } });
        transcript.append_other("custom", &record, &now)?;
    }
    Ok(transcript)
}

/// Session keys map to file names losslessly: `[A-Za-z0-9._-]` stay, other bytes become `%XX`.
pub fn encode_key(key: &str) -> Result<String> {
    let problem = if key.is_empty() {
        Some("it is empty")
    } else if key.len() > 200 {
        Some("it is longer than 200 bytes")
    } else if key == "." || key == ".." {
        Some("it names a directory")
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(Error::SessionKey {
            key: crate::error::excerpt(key, crate::error::QUOTE_BYTES).into_owned(),
            problem: problem.to_string(),
        });
    }
    let mut out = String::with_capacity(key.len());
    for byte in key.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_non_ascii_keys_get_a_stable_short_file_name() {
        let dir = Path::new("/h/sessions");
        for n in [20, 40, 48] {
            let key = format!("agent:{}:{}", "ü".repeat(n), "é".repeat(n));
            assert!(key.len() <= 200, "{}", key.len());
            let path = session_file(dir, &key).unwrap();
            for part in path.strip_prefix(dir).unwrap() {
                assert!(part.len() <= MAX_STEM_BYTES + 6, "{n}: {part:?}");
            }
            assert_eq!(path, session_file(dir, &key).unwrap(), "stable");
            let other = format!("{key}x");
            assert_ne!(path, session_file(dir, &other).unwrap());
        }
        // Short keys keep their plain, readable name.
        assert_eq!(
            session_file(dir, "agent:main:main").unwrap(),
            dir.join("agents/main/agent%3Amain%3Amain.jsonl")
        );
    }

    #[test]
    fn keys_encode_losslessly_and_never_escape_the_sessions_dir() {
        assert_eq!(
            encode_key("agent:main:main").unwrap(),
            "agent%3Amain%3Amain"
        );
        assert_eq!(encode_key("a_b").unwrap(), "a_b");
        assert_ne!(encode_key("a:b").unwrap(), encode_key("a_b").unwrap());
        assert_eq!(encode_key("../etc/passwd").unwrap(), "..%2Fetc%2Fpasswd");
        assert!(encode_key("").is_err());
        assert!(encode_key("..").is_err());
    }
}
