//! Naming things in the engine's state dir (`/state`), where a session's key or id becomes a
//! directory name.

/// `name` as one directory name on any file system: every character outside `[A-Za-z0-9._-]`
/// becomes `_`, and a name that is empty or `.`/`..` (which would name the dir itself or its
/// parent) gets one `_` more. Distinct keys may share a name (`a:b` and `a_b`): an engine that
/// must tell such sessions apart keeps the key itself inside the directory too.
pub fn safe_name(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    match safe.as_str() {
        "" | "." | ".." => safe.replace('.', "_") + "_",
        _ => safe,
    }
}

#[cfg(test)]
mod tests {
    use super::safe_name;

    #[test]
    fn everything_outside_the_safe_set_becomes_an_underscore() {
        assert_eq!(safe_name("agent:main:main"), "agent_main_main");
        assert_eq!(safe_name("a.b_c-D9"), "a.b_c-D9");
        assert_eq!(safe_name("../../etc/passwd"), ".._.._etc_passwd");
        assert_eq!(safe_name("日本"), "__");
    }

    #[test]
    fn no_name_is_the_dir_itself_or_its_parent() {
        assert_eq!(safe_name(".."), "___");
        assert_eq!(safe_name("."), "__");
        assert_eq!(safe_name(""), "_");
    }
}
