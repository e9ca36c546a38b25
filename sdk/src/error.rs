//! The error every hook may return.

/// An engine-level failure, reported by the host as the hook's error message.
///
/// Anything that implements [`Display`](std::fmt::Display) converts into it, so `?` works on
/// `serde_json::Error`, [`HostError`](crate::HostError), `String`, `&str` and the like.
pub struct Error(String);

impl Error {
    /// An error with this message.
    pub fn msg(message: impl Into<String>) -> Self {
        Error(message.into())
    }

    /// The error's message.
    pub fn message(&self) -> &str {
        &self.0
    }

    /// The error's message, owned.
    pub fn into_message(self) -> String {
        self.0
    }
}

impl<E: std::fmt::Display> From<E> for Error {
    fn from(error: E) -> Self {
        Error(error.to_string())
    }
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0, f)
    }
}

/// The result type of every [`ContextEngine`](crate::ContextEngine) hook.
pub type Result<T, E = Error> = std::result::Result<T, E>;
