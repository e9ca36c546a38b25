//! Guest time: the epoch that advances every tick, the deadline trap, and the thread that
//! drives the epoch for the process's one wasmtime `Engine`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::Engine;

/// How often the epoch advances; deadlines are checked at this granularity.
pub(super) const TICK: Duration = Duration::from_millis(10);

/// How much guest time passes between deadline checks (and yields to the executor).
pub(super) const CHECK_EVERY: Duration = Duration::from_millis(50);

pub(super) fn ticks_for(deadline: Duration) -> u64 {
    (deadline.as_millis() / TICK.as_millis()).max(1) as u64
}

/// The trap raised when a call runs out of guest time.
#[derive(Debug, thiserror::Error)]
#[error("deadline exceeded")]
pub struct DeadlineExceeded;

/// Advances the engine's epoch so deadlines fire; stops when dropped.
pub(super) struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    pub(super) fn start(engine: Engine) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("ctxhost-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    engine.increment_epoch();
                }
            })
            .expect("spawning the epoch thread");
        Self { stop }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
