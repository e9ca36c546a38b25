//! The host's token estimate, computed in the guest (a leaf: the host imports' test doubles and
//! the plan builder both count with it).

/// The host's token estimate for a text, computed in the guest: characters / 4, rounded up.
pub fn estimate_tokens(text: &str) -> u32 {
    let chars = u32::try_from(text.chars().count()).unwrap_or(u32::MAX);
    chars.div_ceil(4)
}
