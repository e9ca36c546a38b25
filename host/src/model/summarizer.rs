//! Compaction summaries written by a [`Model`]: the prompts, and the mechanical facts the host
//! appends to what the model wrote.

use ctxhost_transcript::MessageView;
use ctxhost_transcript::compaction::{SummarizeError, Summarizer, SummaryRequest, extractive};

use super::{Completion, Model};

const SYSTEM: &str = "You summarize the earlier part of a conversation between a user and a coding agent so the agent can continue without it. Write a structured markdown summary with these sections, in this order: Current task (the user's latest substantive request, quoted), Started with (the first request), Standing instructions (rules the user gave that still hold: don't/never/always/use X not Y; drop one only when the user replaced it), User requests (every request, oldest first, one line each; leave out acknowledgements like ok/yes/continue), Progress (what is done and what is next), Tool failures (the command or path, and the line naming the error), Files modified, Files read, Recent exchanges. Merge the previous summary in without losing any of its requests or instructions. Keep exact file paths, identifiers, commands and error messages. Be concise.";

const MERGE: &str = "Merge these partial summaries of consecutive parts of one conversation into a single summary with the same sections. The current task is the last part's; keep every user request, standing instruction, failure and file; drop only repetition.";

/// Heading of the facts the host appends to a model's summary.
const FACTS: &str = "## Facts extracted by the host";

/// A [`Summarizer`] that asks a model.
pub struct ModelSummarizer {
    model: Box<dyn Model>,
}

impl ModelSummarizer {
    /// A summarizer asking `model`.
    pub fn new(model: Box<dyn Model>) -> Self {
        Self { model }
    }

    fn ask(&self, system: &str, prompt: &str) -> Result<String, SummarizeError> {
        self.model
            .complete(&Completion {
                system: Some(system),
                prompt,
                max_tokens: None,
            })
            .map_err(SummarizeError::new)
    }
}

/// The model's summary with the mechanical facts appended (a model may drop or garble paths
/// and errors; these are copied from the messages).
fn with_facts(model: String, facts: String) -> String {
    // A previous summary's appended facts are re-extracted, not repeated.
    let prose = match model.find(FACTS) {
        Some(i) => model[..i].trim_end().to_string(),
        None => model,
    };
    if facts.is_empty() {
        return prose;
    }
    format!("{prose}\n\n{FACTS}\n\n{facts}")
}

/// The conversation as plain text for the prompt.
fn transcript_text(messages: &[MessageView]) -> String {
    let mut out = String::new();
    for m in messages {
        out.push_str(&format!("[{}", m.role.as_str()));
        if let Some(t) = &m.tool_name {
            out.push_str(&format!(" {t}"));
        }
        if m.is_error {
            out.push_str(" error");
        }
        out.push_str("]\n");
        out.push_str(&m.text);
        for c in &m.tool_calls {
            out.push_str(&format!("\n(tool call {} {})", c.name, c.arguments));
        }
        out.push_str("\n\n");
    }
    out
}

impl Summarizer for ModelSummarizer {
    fn name(&self) -> String {
        self.model.name()
    }

    fn summarize(&self, r: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        let mut prompt = String::new();
        if let Some(prev) = r.previous_summary {
            prompt.push_str("Summary of the conversation before this part (merge it in):\n");
            prompt.push_str(prev);
            prompt.push_str("\n\n");
        }
        if let Some(f) = r.focus {
            prompt.push_str(&format!("Focus on: {f}\n\n"));
        }
        if let Some(current) = r.current_request {
            prompt.push_str(&format!(
                "The user's latest request (kept verbatim after this part): {current}\n\n"
            ));
        }
        prompt.push_str("Conversation:\n\n");
        prompt.push_str(&transcript_text(r.messages));
        let model = self.ask(SYSTEM, &prompt)?;
        let facts = extractive::mechanical(r.messages, r.previous_summary, r.current_request);
        Ok(with_facts(model, facts))
    }

    fn merge(&self, parts: &[String], focus: Option<&str>) -> Result<String, SummarizeError> {
        let mut prompt = String::new();
        if let Some(f) = focus {
            prompt.push_str(&format!("Focus on: {f}\n\n"));
        }
        for (i, p) in parts.iter().enumerate() {
            prompt.push_str(&format!("## Part {}\n{p}\n\n", i + 1));
        }
        let model = self.ask(MERGE, &prompt)?;
        Ok(with_facts(model, extractive::mechanical_merge(parts)))
    }
}
