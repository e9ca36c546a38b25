//! Message roles: shared by token accounting and message views.

/// Who a context message speaks as (AgentMessage `role`, plus the synthesised summary roles).
///
/// The rule for any other role name (a runtime's own message kind), applied by every reader:
/// the message is accepted, kept byte for byte in the file and through appends, and is not part
/// of the model context (it has no `Role`, counts 0 tokens and has no view), which is what pi
/// does with message kinds its `convertToLlm` does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    User,
    Assistant,
    ToolResult,
    BashExecution,
    Custom,
    BranchSummary,
    CompactionSummary,
}

impl Role {
    /// Every role's v3 name, in the order of the enum (and of the contract's).
    pub const NAMES: [&'static str; 7] = [
        "user",
        "assistant",
        "toolResult",
        "bashExecution",
        "custom",
        "branchSummary",
        "compactionSummary",
    ];

    /// Parse a transcript role name; the v2 name `hookMessage` is the v3 `custom`.
    pub fn parse(name: &str) -> Option<Role> {
        Some(match name {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "toolResult" => Role::ToolResult,
            "bashExecution" => Role::BashExecution,
            "custom" | "hookMessage" => Role::Custom,
            "branchSummary" => Role::BranchSummary,
            "compactionSummary" => Role::CompactionSummary,
            _ => return None,
        })
    }

    /// The v3 role name.
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_message_is_custom() {
        assert_eq!(Role::parse("hookMessage"), Some(Role::Custom));
        assert_eq!(Role::Custom.as_str(), "custom");
    }

    #[test]
    fn every_name_parses_to_the_role_that_spells_it() {
        for name in Role::NAMES {
            assert_eq!(Role::parse(name).map(Role::as_str), Some(name));
        }
    }
}
