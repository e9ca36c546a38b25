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
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::ToolResult => "toolResult",
            Role::BashExecution => "bashExecution",
            Role::Custom => "custom",
            Role::BranchSummary => "branchSummary",
            Role::CompactionSummary => "compactionSummary",
        }
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
}
