//! Message roles: shared by token accounting and message views.

/// Who a context message speaks as (AgentMessage `role`, plus the synthesised summary roles).
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
