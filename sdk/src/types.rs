//! Helpers on the request types for what contract 0.2 carries: tool facts on the context
//! entries, the model and pending prompt of `assemble`, and the window and assembled size of
//! `compact`, and the answer of `bootstrap`. The fields stay public; these say what they mean
//! together.

use crate::context::{AssembleRequest, ContextEntry};

use crate::wit::types::{BootstrapResult, CompactRequest, Role};

use crate::tokens::estimate_tokens;

impl Role {
    /// The role as transcripts spell it (`user`, `toolResult`, ...), as the host's search
    /// requests and hits name it.
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

impl AssembleRequest {
    /// The tool results of the context, in order: from the entries alone, no host call.
    pub fn tool_results(&self) -> impl DoubleEndedIterator<Item = &ContextEntry> + '_ {
        self.entries.iter().filter(|e| e.is_tool_result())
    }

    /// The tool results of the tool called `name`, in order.
    ///
    /// ```
    /// # let request = ctxhost_sdk::testing::assemble_request(&[]);
    /// let newest_read = request.tool_results_named("read").next_back();
    /// # assert!(newest_read.is_none());
    /// ```
    pub fn tool_results_named<'a>(
        &'a self,
        name: &'a str,
    ) -> impl DoubleEndedIterator<Item = &'a ContextEntry> + 'a {
        self.entries
            .iter()
            .filter(move |e| e.is_tool_result_of(name))
    }

    /// The tokens the plan may use: the runtime's budget when it set one, else the window.
    pub fn budget(&self) -> u32 {
        self.token_budget.unwrap_or(self.context_window)
    }

    /// The model the context is for, when the runtime named it (e.g.
    /// `anthropic/claude-sonnet-4`).
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// The prompt about to be sent (not yet in the transcript), when the runtime has it.
    pub fn prompt(&self) -> Option<&str> {
        self.prompt.as_deref()
    }

    /// The host's estimate of the pending prompt's tokens; 0 without one.
    pub fn prompt_tokens(&self) -> u32 {
        self.prompt().map_or(0, estimate_tokens)
    }

    /// The same request for `model` (tests and tools that build requests).
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The same request with `prompt` pending.
    pub fn with_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.prompt = Some(prompt.into());
        self
    }
}

impl CompactRequest {
    /// What the model receives: this engine's last assembled estimate in the session when
    /// there was one (an engine that trims sends less than the transcript holds), else the
    /// host's count of the context. What the built-in compaction picks its layer by.
    pub fn received_tokens(&self) -> Option<u32> {
        self.assembled_tokens.or(self.current_tokens)
    }

    /// [`received_tokens`](Self::received_tokens) as a share of the context window (1.0 is a
    /// full window); `None` when either is unknown.
    pub fn window_share(&self) -> Option<f64> {
        let received = self.received_tokens()?;
        (self.context_window > 0).then(|| f64::from(received) / f64::from(self.context_window))
    }

    /// The same request, as if this engine's last `assemble` estimated `tokens`.
    pub fn with_assembled_tokens(mut self, tokens: u32) -> Self {
        self.assembled_tokens = Some(tokens);
        self
    }
}

impl BootstrapResult {
    /// The engine serves the session from its own state, restored or begun; `reason` says how,
    /// for the operator's log (`"resumed from checkpoint 12"`).
    pub fn bootstrapped(reason: impl Into<String>) -> Self {
        Self {
            bootstrapped: true,
            imported_messages: None,
            reason: Some(reason.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::context::ContextEntry;
    use crate::testing::{assemble_request, compact_request, message, tool_result};
    use crate::wit::types::Role;

    #[test]
    fn tool_results_by_name_come_from_the_entries() {
        let history = [
            message(0, Role::User, "look"),
            tool_result(1, "read", "fn main() {}"),
            tool_result(2, "bash", "ok"),
            tool_result(3, "read", "mod x;"),
        ];
        let request = assemble_request(&history);
        let reads: Vec<u32> = request
            .tool_results_named("read")
            .map(|e| e.entry)
            .collect();
        assert_eq!(reads, [1, 3]);
        assert_eq!(request.tool_results().count(), 3);
        assert!(request.tool_results_named("write").next().is_none());
        let user: &ContextEntry = &request.entries[0];
        assert!(!user.is_tool_result() && !user.is_tool_result_of("read"));
    }

    #[test]
    fn budget_model_and_prompt() {
        let mut request = assemble_request(&[])
            .with_model("m/1")
            .with_prompt("12345678");
        assert_eq!(request.budget(), 200_000);
        request.token_budget = Some(10);
        assert_eq!(request.budget(), 10);
        assert_eq!(
            (request.model(), request.prompt()),
            (Some("m/1"), Some("12345678"))
        );
        assert_eq!(request.prompt_tokens(), 2);
        assert_eq!(assemble_request(&[]).prompt_tokens(), 0);
    }

    #[test]
    fn the_size_received_prefers_what_the_engine_assembled() {
        let mut request = compact_request();
        assert_eq!(
            (request.received_tokens(), request.window_share()),
            (None, None)
        );
        request.current_tokens = Some(150_000);
        assert_eq!(request.window_share(), Some(0.75));
        let request = request.with_assembled_tokens(50_000);
        assert_eq!(request.received_tokens(), Some(50_000));
        assert_eq!(request.window_share(), Some(0.25));
        let windowless = crate::wit::types::CompactRequest {
            context_window: 0,
            ..request
        };
        assert_eq!(windowless.window_share(), None);
    }
}
