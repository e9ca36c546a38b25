//! The sidecar's own stdin and stdout. When they are pipes (an agent's bridge spawned it) they
//! are read and written through the reactor, as a socket is: tokio's `stdin()` and `stdout()`
//! hand every read and every write to a blocking thread, and waking those threads was most of a
//! small request's round trip. Anything else (a terminal, a file) goes the blocking way.

use std::os::fd::AsFd;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;

/// Standard input, through the reactor when it is a pipe.
pub(crate) fn input() -> Pin<Box<dyn AsyncRead + Send>> {
    let pipe = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Receiver::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::pin(pipe),
        Err(_) => Box::pin(tokio::io::stdin()),
    }
}

/// Standard output, through the reactor when it is a pipe.
pub(crate) fn output() -> Pin<Box<dyn AsyncWrite + Send>> {
    let pipe = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Sender::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::pin(pipe),
        Err(_) => Box::pin(tokio::io::stdout()),
    }
}
