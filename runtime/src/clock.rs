//! A call's clocks: guest time (wall time minus time in slow host imports, against the call's
//! deadline) and wall time (against its hard cap), and the host-side watchdog that enforces
//! both whatever the guest is doing.
//!
//! The epoch interrupt checks the deadline only while guest code runs; a guest blocked in a
//! WASI `poll` (a `sleep`) runs no code and is never interrupted. So every export call also
//! races a watchdog that reads the same clock from outside the store and ends the call when
//! either bound passes, a little after the epoch would have (its trap names the limit better).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::epoch::{CHECK_EVERY, DeadlineExceeded};
use super::error::LimitExceeded;

/// What the watchdog reads of a running call, written by the store's imports.
#[derive(Debug, Default)]
struct HostTime {
    /// Time spent in finished slow imports, in nanoseconds.
    finished_nanos: AtomicU64,
    /// A slow import is running: its time is the host's, not the guest's.
    in_slow_import: AtomicBool,
}

impl HostTime {
    fn finished(&self) -> Duration {
        Duration::from_nanos(self.finished_nanos.load(Ordering::Relaxed))
    }
}

/// Guest time of the current call: wall time since it started minus time spent in host
/// imports, which have their own bounds and must not count against the engine. The wall time
/// itself, imports included, has a hard cap of its own.
#[derive(Debug)]
pub(super) struct CallClock {
    started: Instant,
    host: Arc<HostTime>,
    pub(super) deadline: Duration,
    wall: Duration,
}

impl CallClock {
    pub(super) fn new() -> Self {
        Self {
            started: Instant::now(),
            host: Arc::default(),
            deadline: Duration::MAX,
            wall: Duration::MAX,
        }
    }
    pub(super) fn start(&mut self, deadline: Duration, wall: Duration) {
        self.started = Instant::now();
        self.host = Arc::default();
        self.deadline = deadline;
        self.wall = wall;
    }
    pub(super) fn guest_time(&self) -> Duration {
        self.started.elapsed().saturating_sub(self.host.finished())
    }
    /// Guest time left before the deadline.
    pub(super) fn remaining(&self) -> Duration {
        self.deadline.saturating_sub(self.guest_time())
    }
    /// Wall time left before the call's hard cap.
    pub(super) fn wall_remaining(&self) -> Duration {
        self.wall.saturating_sub(self.started.elapsed())
    }
    /// The trap that ends a call past its wall-time cap, saying where the time went.
    pub(super) fn wall_exceeded(&self) -> LimitExceeded {
        wall_exceeded(self.started, &self.host, self.wall)
    }
    /// A slow import starts: until [`CallClock::add_host_time`], time is the host's.
    pub(super) fn enter_host(&self) -> Instant {
        self.host.in_slow_import.store(true, Ordering::Relaxed);
        Instant::now()
    }
    /// A slow import that started at `since` ended.
    pub(super) fn add_host_time(&mut self, since: Instant) {
        let nanos = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.host.finished_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.host.in_slow_import.store(false, Ordering::Relaxed);
    }
    /// The watchdog of the call just started.
    pub(super) fn watchdog(&self) -> Watchdog {
        Watchdog {
            started: self.started,
            host: self.host.clone(),
            deadline: self.deadline,
            wall: self.wall,
        }
    }
}

fn wall_exceeded(started: Instant, host: &HostTime, wall: Duration) -> LimitExceeded {
    LimitExceeded::new(format!(
        "ran for {:.1?} of wall time ({:.1?} of it in host imports), over its cap of {:?} (limits.{})",
        started.elapsed(),
        host.finished(),
        wall,
        crate::limits::WALL_TIMEOUT_MS.key
    ))
}

/// Ends a call from outside its store when its deadline or wall cap passes.
pub(super) struct Watchdog {
    started: Instant,
    host: Arc<HostTime>,
    deadline: Duration,
    wall: Duration,
}

impl Watchdog {
    /// Resolves, with the trap to end the call with, once a bound has passed.
    async fn expired(self) -> wasmtime::Error {
        loop {
            let elapsed = self.started.elapsed();
            let wall_left = self.wall.saturating_sub(elapsed);
            if wall_left.is_zero() {
                return wall_exceeded(self.started, &self.host, self.wall).into();
            }
            // A slow import has its own timeout within the wall cap; guest time stands still
            // meanwhile, and is looked at again a second later.
            let guest_left = if self.host.in_slow_import.load(Ordering::Relaxed) {
                wall_left.min(Duration::from_secs(1))
            } else {
                let guest = elapsed.saturating_sub(self.host.finished());
                let left = self.deadline.saturating_sub(guest);
                if left.is_zero() {
                    return DeadlineExceeded.into();
                }
                left
            };
            // The grace lets the epoch trap a running guest first; the clock is read again
            // after (at least hourly), since time in slow imports does not count.
            let wait = guest_left.min(wall_left).min(Duration::from_secs(3600));
            tokio::time::sleep(wait.saturating_add(CHECK_EVERY)).await;
        }
    }

    /// Runs `call` until it finishes or a bound passes, whichever comes first. A call cut off
    /// here leaves its instance mid-call: the trap is a fault, which discards the instance.
    pub(super) async fn bound<T>(
        self,
        call: impl Future<Output = wasmtime::Result<T>>,
    ) -> wasmtime::Result<T> {
        tokio::select! {
            biased;
            outcome = call => outcome,
            trap = self.expired() => Err(trap),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wall_clock_counts_time_in_imports() {
        let mut clock = CallClock::new();
        clock.start(Duration::from_secs(10), Duration::from_millis(20));
        let since = clock.enter_host();
        std::thread::sleep(Duration::from_millis(30));
        clock.add_host_time(since);
        assert!(
            clock.remaining() > Duration::from_secs(9),
            "guest time excludes imports"
        );
        assert!(clock.wall_remaining().is_zero());
        let err = clock.wall_exceeded().message;
        assert!(
            err.contains("in host imports") && err.contains("wallTimeoutMs"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_call_that_never_finishes_ends_at_its_deadline() {
        let mut clock = CallClock::new();
        clock.start(Duration::from_millis(20), Duration::from_secs(60));
        let never = std::future::pending::<wasmtime::Result<()>>();
        let trap = clock.watchdog().bound(never).await.unwrap_err();
        assert!(trap.downcast_ref::<DeadlineExceeded>().is_some(), "{trap}");
    }

    #[tokio::test]
    async fn time_in_a_slow_import_is_bounded_by_the_wall_cap_only() {
        let mut clock = CallClock::new();
        clock.start(Duration::from_millis(10), Duration::from_millis(80));
        let _since = clock.enter_host();
        let never = std::future::pending::<wasmtime::Result<()>>();
        let trap = clock.watchdog().bound(never).await.unwrap_err();
        let limit = trap.downcast_ref::<LimitExceeded>().expect("the wall cap");
        assert!(limit.message.contains("wallTimeoutMs"), "{}", limit.message);
    }
}
