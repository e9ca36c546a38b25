//! Agent tools an engine offers the model (contract 0.3): each tool is one typed function.
//!
//! ```
//! use ctxhost_sdk::{ContextEngine, EngineInfo, Result, Tools};
//! use serde::Deserialize;
//!
//! #[derive(Default)]
//! struct Notes {
//!     notes: Vec<String>,
//! }
//!
//! #[derive(Deserialize)]
//! struct Find {
//!     word: String,
//! }
//!
//! impl ContextEngine for Notes {
//!     fn info() -> EngineInfo {
//!         EngineInfo::new("notes", "Notes", "0.1.0")
//!     }
//!
//!     fn tools(&self) -> Tools<Self> {
//!         Tools::new().tool(
//!             "notes_find",
//!             "Find the notes that mention a word.",
//!             serde_json::json!({
//!                 "type": "object",
//!                 "properties": {"word": {"type": "string"}},
//!                 "required": ["word"]
//!             }),
//!             |engine: &mut Notes, args: Find| -> Result<String> {
//!                 let found: Vec<&str> = engine
//!                     .notes
//!                     .iter()
//!                     .filter(|n| n.contains(&args.word))
//!                     .map(String::as_str)
//!                     .collect();
//!                 Ok(found.join("\n"))
//!             },
//!         )
//!     }
//! }
//! ```

use serde::de::DeserializeOwned;

use crate::error::Result;

pub use crate::wit::tools::{Tool as ToolSpec, ToolOutput};

type Handler<E> = Box<dyn Fn(&mut E, &str) -> ToolOutput>;

/// The tools an engine offers: built with [`Tools::tool`], returned from
/// [`ContextEngine::tools`](crate::ContextEngine::tools).
pub struct Tools<E> {
    tools: Vec<(ToolSpec, Handler<E>)>,
}

impl<E> Default for Tools<E> {
    fn default() -> Self {
        Self { tools: Vec::new() }
    }
}

impl<E: 'static> Tools<E> {
    /// No tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool. `parameters` is the JSON Schema of its arguments (an object schema; the
    /// host checks every call against it before the engine runs); `run` receives them decoded
    /// as `A`. What `run` returns is the text the model reads; an `Err` reaches the model as a
    /// failed call with its message (a bad id, nothing found), not as an engine fault.
    pub fn tool<A: DeserializeOwned + 'static>(
        mut self,
        name: &str,
        description: &str,
        parameters: serde_json::Value,
        run: impl Fn(&mut E, A) -> Result<String> + 'static,
    ) -> Self {
        let tool_name = name.to_string();
        let handler = move |engine: &mut E, arguments: &str| {
            let decoded = serde_json::from_str::<A>(arguments).map_err(|e| {
                crate::error::Error::msg(format!("{tool_name}: arguments do not match: {e}"))
            });
            match decoded.and_then(|args| run(engine, args)) {
                Ok(content) => ToolOutput {
                    content,
                    is_error: false,
                },
                Err(error) => ToolOutput {
                    content: error.into_message(),
                    is_error: true,
                },
            }
        };
        self.tools.push((
            ToolSpec {
                name: name.to_string(),
                description: description.to_string(),
                parameters: parameters.to_string(),
            },
            Box::new(handler),
        ));
        self
    }

    /// The tools as the host lists them.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|(spec, _)| spec.clone()).collect()
    }

    /// Runs the tool `name` on `engine`; a name not offered is an error output.
    pub fn call(&self, engine: &mut E, name: &str, arguments: &str) -> ToolOutput {
        match self.tools.iter().find(|(spec, _)| spec.name == name) {
            Some((_, run)) => run(engine, arguments),
            None => ToolOutput {
                content: format!("this engine has no tool `{name}`"),
                is_error: true,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Counter {
        n: u32,
    }

    #[derive(serde::Deserialize)]
    struct Add {
        by: u32,
    }

    fn tools() -> Tools<Counter> {
        Tools::new().tool(
            "add",
            "Adds to the counter.",
            serde_json::json!({"type": "object", "properties": {"by": {"type": "integer"}}}),
            |c: &mut Counter, a: Add| {
                if a.by == 0 {
                    return Err(crate::error::Error::msg("adding 0 changes nothing"));
                }
                c.n += a.by;
                Ok(format!("now {}", c.n))
            },
        )
    }

    #[test]
    fn a_tool_is_a_typed_function_and_its_errors_reach_the_model() {
        let mut counter = Counter::default();
        let tools = tools();
        assert_eq!(tools.specs()[0].name, "add");
        assert!(tools.specs()[0].parameters.contains("\"by\""));
        let out = tools.call(&mut counter, "add", r#"{"by": 2}"#);
        assert_eq!((out.content.as_str(), out.is_error), ("now 2", false));
        let out = tools.call(&mut counter, "add", r#"{"by": 0}"#);
        assert!(
            out.is_error && out.content.contains("changes nothing"),
            "{}",
            out.content
        );
        let out = tools.call(&mut counter, "add", r#"{"by": "x"}"#);
        assert!(
            out.is_error && out.content.starts_with("add: arguments do not match"),
            "{}",
            out.content
        );
        let out = tools.call(&mut counter, "nope", "{}");
        assert!(out.is_error && out.content.contains("no tool `nope`"));
        assert_eq!(counter.n, 2);
    }
}
