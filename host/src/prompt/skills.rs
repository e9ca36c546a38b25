//! Skills: one folder per skill under the workspace's `skills/`, described by the front matter
//! of its `SKILL.md` (`name`, `description`). The prompt lists them; the agent reads one on demand.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// A skill the prompt lists: its folder's `SKILL.md` front matter.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Skill {
    /// `name`, as the agent asks for it.
    pub name: String,
    /// `description`: when the skill is useful.
    pub description: String,
}

#[derive(Deserialize)]
struct FrontMatter {
    name: Option<String>,
    description: Option<String>,
}

/// The skills of `workspace`, sorted by name; unreadable or undescribed ones become warnings.
pub fn load(workspace: &Path) -> (Vec<Skill>, Vec<String>) {
    let mut skills = Vec::new();
    let mut warnings = Vec::new();
    let Ok(entries) = std::fs::read_dir(workspace.join("skills")) else {
        return (skills, warnings);
    };
    for entry in entries.flatten() {
        let file = entry.path().join("SKILL.md");
        if !file.is_file() {
            continue;
        }
        let folder = entry.file_name().to_string_lossy().into_owned();
        match read_skill(&file, folder) {
            Ok(skill) => skills.push(skill),
            Err(warning) => warnings.push(warning),
        }
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    (skills, warnings)
}

/// The skill described in `file` (named for its `folder` unless it names itself), or why it
/// is skipped.
fn read_skill(file: &Path, folder: String) -> Result<Skill, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    match front_matter(&text) {
        Ok(Some(FrontMatter {
            name,
            description: Some(description),
        })) => Ok(Skill {
            name: name.unwrap_or(folder),
            description: description.trim().to_string(),
        }),
        Ok(_) => Err(format!(
            "{}: no `description` in its front matter; skipped",
            file.display()
        )),
        Err(e) => Err(format!("{}: front matter: {e}", file.display())),
    }
}

/// Parses the `---` fenced YAML block at the start of a file, if any.
fn front_matter(text: &str) -> Result<Option<FrontMatter>, String> {
    let Some(rest) = text.strip_prefix("---") else {
        return Ok(None);
    };
    let Some(end) = rest.find("\n---") else {
        return Err("opening `---` without a closing one".into());
    };
    serde_saphyr::from_str(&rest[..end])
        .map(Some)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skills_come_from_front_matter_and_bad_ones_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            std::fs::create_dir_all(dir.path().join("skills").join(name)).unwrap();
            std::fs::write(dir.path().join("skills").join(name).join("SKILL.md"), text).unwrap();
        };
        write(
            "pdf",
            "---\nname: pdf\ndescription: \"Read PDFs: text, tables\"\n---\n# PDF\n",
        );
        write("git", "---\ndescription: Commit with care\n---\nbody");
        write("broken", "---\ndescription: [unclosed\n---\n");
        write("plain", "# no front matter\n");
        let (skills, warnings) = load(dir.path());
        assert_eq!(
            skills,
            [
                Skill {
                    name: "git".into(),
                    description: "Commit with care".into()
                },
                Skill {
                    name: "pdf".into(),
                    description: "Read PDFs: text, tables".into()
                },
            ]
        );
        assert_eq!(warnings.len(), 2, "{warnings:?}");
    }
}
