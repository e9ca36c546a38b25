//! The sidecar's own stdin and stdout. When they are pipes (an agent's bridge spawned it) they
//! are read and written through the reactor, as a socket is: tokio's `stdin()` and `stdout()`
//! hand every read and every write to a blocking thread, and waking those threads was most of a
//! small request's round trip. Anything else (a terminal, a file) goes the blocking way.
//!
//! A pipe is also watched for a moment after it runs dry before the worker parks: an agent's
//! requests come in bursts (commit, assemble, after-turn), and a parked worker on an idle
//! (virtual) CPU took ~25 µs to wake for the next one.

use std::os::fd::AsFd;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::unix::pipe;

/// How long a dry pipe is watched before the worker parks: an agent's wake-up and its next
/// request fit in it, and it costs that much CPU at most once per pause. Between reads the
/// thread yields its CPU too: on two cores a watching worker otherwise delayed the very
/// threads (the agent's, the other worker) that the next request needs.
const WATCH: Duration = Duration::from_micros(50);

/// Standard input, through the reactor when it is a pipe.
pub(crate) fn input() -> Pin<Box<dyn AsyncRead + Send>> {
    let pipe = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Receiver::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::pin(Watched::new(pipe, WATCH)),
        Err(_) => Box::pin(tokio::io::stdin()),
    }
}

/// A pipe that, when it runs dry, keeps its worker reading it for `watch` (yielding to every
/// other task between reads) before letting it park. It reads the pipe itself while watching:
/// the reactor may be held by a parked worker that the pipe's readiness would have to wake.
struct Watched {
    pipe: pipe::Receiver,
    watch: Duration,
    dry_since: Option<Instant>,
}

impl Watched {
    fn new(pipe: pipe::Receiver, watch: Duration) -> Self {
        Self {
            pipe,
            watch,
            dry_since: None,
        }
    }

    /// Whether the pipe, dry since some moment (from now on if it just ran dry), is still
    /// within its watch.
    fn watching(&mut self) -> bool {
        let now = Instant::now();
        now - *self.dry_since.get_or_insert(now) < self.watch
    }

    /// One read of the pipe without the reactor: None when it is still dry.
    fn read_now(&self, buf: &mut ReadBuf<'_>) -> Option<std::io::Result<()>> {
        match rustix::io::read(&self.pipe, buf.initialize_unfilled()) {
            Ok(n) => {
                buf.advance(n);
                Some(Ok(()))
            }
            Err(rustix::io::Errno::AGAIN) => None,
            Err(e) => Some(Err(e.into())),
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        let mut read = Pin::new(&mut this.pipe).poll_read(cx, buf);
        if read.is_pending() && this.watching() {
            match this.read_now(buf) {
                Some(outcome) => read = Poll::Ready(outcome),
                // Polled again once the worker has run its other tasks; the reactor's wake-up
                // stays registered for after the watch.
                None => {
                    std::thread::yield_now();
                    let _ = std::pin::pin!(tokio::task::yield_now()).poll(cx);
                }
            }
        }
        if read.is_ready() {
            this.dry_since = None;
        }
        read
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

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    async fn read_some(reader: &mut Watched) -> Vec<u8> {
        let mut buf = [0u8; 64];
        let n = reader.read(&mut buf).await.unwrap();
        buf[..n].to_vec()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_watched_pipe_reads_what_comes_while_watched_after_and_its_end() {
        let (mut tx, rx) = pipe::pipe().unwrap();
        // A watch longer than the test: the pipe is watched throughout.
        let mut watching = Watched::new(rx, Duration::from_secs(60));
        let writer = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            tx.write_all(b"one\n").await.unwrap();
            tx
        });
        assert_eq!(read_some(&mut watching).await, b"one\n");
        let mut tx = writer.await.unwrap();
        tx.write_all(b"two\n").await.unwrap();
        assert_eq!(read_some(&mut watching).await, b"two\n");
        drop(tx);
        assert!(
            read_some(&mut watching).await.is_empty(),
            "the end of the pipe"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn after_its_watch_a_pipe_is_read_when_the_reactor_wakes_it() {
        let (mut tx, rx) = pipe::pipe().unwrap();
        let mut parked = Watched::new(rx, Duration::ZERO);
        let writer = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            tx.write_all(b"late\n").await.unwrap();
        });
        assert_eq!(read_some(&mut parked).await, b"late\n");
        writer.await.unwrap();
    }
}
