//! "Did you mean": the known name an unknown one most likely meant, for config keys and the
//! model provider's name alike.

/// The known name `key` most likely means: the same but for case, or close in spelling.
pub(crate) fn closest(key: &str, known: &[&str]) -> Option<String> {
    if let Some(same) = known.iter().find(|k| k.eq_ignore_ascii_case(key)) {
        return Some(same.to_string());
    }
    known
        .iter()
        .map(|k| {
            (
                strsim::jaro_winkler(&key.to_ascii_lowercase(), &k.to_ascii_lowercase()),
                k,
            )
        })
        .filter(|(score, _)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_catch_case_and_typos_but_not_strangers() {
        let known = ["autoEnabled", "pruneAt", "reserveTokens"];
        assert_eq!(
            closest("autoenabled", &known).as_deref(),
            Some("autoEnabled")
        );
        assert_eq!(
            closest("autoEnabeld", &known).as_deref(),
            Some("autoEnabled")
        );
        assert_eq!(
            closest("reserveToken", &known).as_deref(),
            Some("reserveTokens")
        );
        assert_eq!(closest("gateway", &known), None);
    }
}
