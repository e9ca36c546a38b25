//! Which sessions hold an engine instance and descriptors. The instance pool has a fixed
//! number of slots and the process a fixed number of descriptors, so a server with more
//! sessions than either allows keeps only the recently used ones resident: a session coming in
//! takes the place of the least recently used idle one, which gives its instance and
//! descriptors back and takes them again on its next call.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use ctxhost::transcript::TranscriptError;

use ctxhost::error::Error;
use ctxhost::runtime::{EngineError, FaultKind};

/// Descriptors a resident session may hold: its mirror, its ledger, its engine's state dir,
/// its recall index and its session lock.
const DESCRIPTORS_PER_SESSION: u64 = 5;

/// Sessions given up at once when the host runs short anyway: one slot rarely frees enough
/// descriptors.
const SHORTAGE_BATCH: usize = 4;

/// The limit that bounds how many sessions are resident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Limit {
    /// The instance pool's slots (`--max-instances`).
    Instances(u32),
    /// The process's descriptors (`ulimit -n`).
    Descriptors(u64),
}

impl Limit {
    /// The limit's name in an error's `data`.
    pub(super) fn name(self) -> &'static str {
        match self {
            Limit::Instances(_) => "instances",
            Limit::Descriptors(_) => "descriptors",
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Instances(slots) => write!(
                f,
                "the instance pool's {slots} slots (`ctxhost serve --max-instances`)"
            ),
            Limit::Descriptors(soft) => {
                write!(f, "the process's {soft} file descriptors (`ulimit -n`)")
            }
        }
    }
}

/// How many sessions may be resident at once, and the limit that says so: the pool's slots
/// less the two an engine load and a fallback's load borrow, and the descriptors left once what
/// is open now and a reserve for connections and the host's own files are set aside.
pub(super) fn capacity(pool_slots: Option<u32>) -> (usize, Limit) {
    let by_pool =
        pool_slots.map(|slots| (slots.saturating_sub(BORROWED_SLOTS).max(1) as usize, slots));
    let by_descriptors = descriptor_capacity();
    match (by_pool, by_descriptors) {
        (Some((pool, slots)), Some((fds, _))) if pool <= fds => (pool, Limit::Instances(slots)),
        (_, Some((fds, soft))) => (fds, Limit::Descriptors(soft)),
        (Some((pool, slots)), None) => (pool, Limit::Instances(slots)),
        (None, None) => (usize::MAX, Limit::Descriptors(u64::MAX)),
    }
}

/// Instance slots an engine load and a fallback engine's load borrow for their `info` call.
const BORROWED_SLOTS: u32 = 2;

/// How many sessions the descriptor limit lets be resident, and the limit; None when unlimited.
fn descriptor_capacity() -> Option<(usize, u64)> {
    let soft = descriptor_limit()?;
    Some((sessions_within(soft, open_descriptors()) as usize, soft))
}

/// Sessions that may be resident under a soft limit of `soft` with `open` descriptors open,
/// after a reserve for connections and the host's own files.
fn sessions_within(soft: u64, open: u64) -> u64 {
    let reserve = (soft / 8).max(32);
    (soft.saturating_sub(open + reserve) / DESCRIPTORS_PER_SESSION).max(1)
}

/// The instance pool a server needs: a slot for every session the descriptor limit lets be
/// resident and for the engine loads, at most `most`. A bigger pool would never fill, and
/// reserving it is most of a fresh sidecar's start (a guard page set per slot's stack).
pub(super) fn pool_slots(most: u32) -> u32 {
    descriptor_capacity().map_or(most, |(sessions, _)| {
        u32::try_from(sessions)
            .unwrap_or(u32::MAX)
            .saturating_add(BORROWED_SLOTS)
            .min(most)
    })
}

/// Raises the soft descriptor limit (never past the hard one) so that `slots` instance slots
/// can all be held by resident sessions: the soft limit is often 1,024 where the hard one
/// allows far more, and an operator asking for `--max-instances 1000` means a thousand.
/// Returns the soft limit in force afterwards (None: unlimited); when the system refuses,
/// the limit stays as it was and residency is bounded by it as before.
pub(super) fn raise_descriptor_limit_for(slots: u32) -> Option<u64> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let soft = limit.current?;
    let sessions = u64::from(slots.saturating_sub(BORROWED_SLOTS).max(1));
    let wanted = descriptors_for(sessions, open_descriptors() + OPENED_AFTER_THE_RAISE);
    let target = limit.maximum.map_or(wanted, |hard| wanted.min(hard));
    if target > soft {
        let raised = Rlimit {
            current: Some(target),
            maximum: limit.maximum,
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::debug!("cannot raise the descriptor limit from {soft} to {target}: {e}");
        }
    }
    descriptor_limit()
}

/// Descriptors the host opens as it starts, after the limit is raised for its pool (the pool
/// keeps `/proc/self/pagemap` open to reset its slots): room kept for them and a few more.
const OPENED_AFTER_THE_RAISE: u64 = 8;

/// The soft limit at which `descriptor_capacity` lets `sessions` be resident with `open`
/// descriptors open: its inverse.
fn descriptors_for(sessions: u64, open: u64) -> u64 {
    let needed = sessions * DESCRIPTORS_PER_SESSION + open;
    // The reserve is an eighth of the limit, at least 32.
    (needed * 8).div_ceil(7).max(needed + 32)
}

/// The soft limit on descriptors; None when unlimited.
fn descriptor_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// Descriptors open now (a guess where `/proc` cannot tell).
fn open_descriptors() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(16, |dir| dir.count() as u64)
}

/// The errno values of a process (or the system) out of descriptors.
fn descriptor_errnos() -> [i32; 2] {
    use rustix::io::Errno;
    [Errno::MFILE.raw_os_error(), Errno::NFILE.raw_os_error()]
}

/// Whether an I/O error is the process or the system out of descriptors.
pub(super) fn out_of_descriptors(error: &std::io::Error) -> bool {
    error
        .raw_os_error()
        .is_some_and(|code| descriptor_errnos().contains(&code))
}

/// The limit an error says the host ran out of, if it says so: the instance pool's slots
/// (`pool_slots`), or descriptors (when opening a mirror, its ledger or an engine's state dir).
pub(super) fn shortage(error: &Error, pool_slots: Option<u32>) -> Option<Limit> {
    let descriptors = || Limit::Descriptors(descriptor_limit().unwrap_or(u64::MAX));
    match error {
        Error::Engine(EngineError::Fault {
            kind: FaultKind::HostResources,
            detail,
            ..
        }) => {
            // The pool's refusal, or the state dir's preopen failing for want of a descriptor
            // (whose detail carries the OS error).
            let no_descriptor = (descriptor_errnos().iter())
                .any(|code| detail.contains(&format!("os error {code}")));
            Some(if no_descriptor {
                descriptors()
            } else {
                Limit::Instances(pool_slots.unwrap_or(0))
            })
        }
        Error::Io { source, .. } if out_of_descriptors(source) => Some(descriptors()),
        Error::Transcript(TranscriptError::Io { error, .. }) if out_of_descriptors(error) => {
            Some(descriptors())
        }
        _ => None,
    }
}

struct Resident<H> {
    /// When it last finished a call (a tick of [`State::clock`]).
    last_used: u64,
    /// Running a call now: never given up.
    busy: bool,
    /// Asks it to give its resources back.
    handle: H,
}

struct State<H> {
    capacity: usize,
    limit: Limit,
    resident: HashMap<u64, Resident<H>>,
    clock: u64,
}

/// The resident sessions (by actor id), in the order they were last used, each with a handle
/// `H` that asks it to give its resources back.
pub(super) struct Residency<H> {
    state: Mutex<State<H>>,
    /// Sessions that gave their resources up for another.
    evictions: AtomicU64,
}

impl<H: Clone> Residency<H> {
    pub(super) fn new(capacity: usize, limit: Limit) -> Self {
        Self {
            state: Mutex::new(State {
                capacity,
                limit,
                resident: HashMap::new(),
                clock: 0,
            }),
            evictions: AtomicU64::new(0),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State<H>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks session `id` busy and resident; returns the idle sessions that must give their
    /// place up for it (least recently used first) when the resident ones are full.
    pub(super) fn enter(&self, id: u64, handle: &H) -> Vec<H> {
        let mut state = self.state();
        if let Some(resident) = state.resident.get_mut(&id) {
            resident.busy = true;
            return Vec::new();
        }
        let resident = Resident {
            last_used: 0,
            busy: true,
            handle: handle.clone(),
        };
        state.resident.insert(id, resident);
        let over = state.resident.len().saturating_sub(state.capacity);
        self.take_idle(&mut state, over)
    }

    /// Marks session `id` idle (its call finished).
    pub(super) fn leave(&self, id: u64) {
        let mut state = self.state();
        state.clock += 1;
        let now = state.clock;
        if let Some(resident) = state.resident.get_mut(&id) {
            resident.busy = false;
            resident.last_used = now;
        }
    }

    /// Session `id` holds nothing any more.
    pub(super) fn remove(&self, id: u64) {
        self.state().resident.remove(&id);
    }

    /// The host ran out of `limit` while a session took its resources: when fewer others were
    /// resident than the capacity allowed, the capacity comes down to what fitted; a few idle
    /// sessions are returned to give their resources up (none left: nothing can be freed).
    pub(super) fn short_of(&self, limit: Limit) -> Vec<H> {
        let mut state = self.state();
        let others = state.resident.len().saturating_sub(1).max(1);
        if others < state.capacity {
            tracing::warn!(
                "out of {limit} with {others} other sessions resident: at most {others} stay resident from now on"
            );
            state.capacity = others;
            state.limit = limit;
        }
        self.take_idle(&mut state, SHORTAGE_BATCH)
    }

    /// Removes up to `n` idle sessions, least recently used first, and returns their handles.
    fn take_idle(&self, state: &mut State<H>, n: usize) -> Vec<H> {
        if n == 0 {
            return Vec::new();
        }
        let mut idle: Vec<(u64, u64)> = (state.resident.iter())
            .filter(|(_, r)| !r.busy)
            .map(|(&id, r)| (r.last_used, id))
            .collect();
        if idle.len() > n {
            idle.select_nth_unstable(n - 1);
            idle.truncate(n);
        }
        self.evictions
            .fetch_add(idle.len() as u64, Ordering::Relaxed);
        (idle.into_iter())
            .filter_map(|(_, id)| state.resident.remove(&id))
            .map(|r| r.handle)
            .collect()
    }

    /// The limit that bounds the resident sessions now.
    pub(super) fn limit(&self) -> Limit {
        self.state().limit
    }

    /// (resident sessions, how many may be, sessions that gave their resources up for another).
    pub(super) fn counts(&self) -> (usize, usize, u64) {
        let state = self.state();
        let evictions = self.evictions.load(Ordering::Relaxed);
        (state.resident.len(), state.capacity, evictions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_house_gives_up_its_least_recently_used_idle_sessions() {
        let residency = Residency::new(2, Limit::Instances(4));
        assert!(residency.enter(1, &"one").is_empty());
        residency.leave(1);
        assert!(residency.enter(2, &"two").is_empty());
        residency.leave(2);
        // 1 was used before 2: it goes.
        assert_eq!(residency.enter(3, &"three"), ["one"]);
        // 3 is busy and 2 idle: 2 goes, however recently it was used.
        assert_eq!(residency.enter(4, &"four"), ["two"]);
        // Both busy: nothing can go; the caller finds out when the host runs short.
        assert!(residency.enter(5, &"five").is_empty());
        assert_eq!(
            residency.short_of(Limit::Descriptors(64)),
            Vec::<&str>::new()
        );
        residency.leave(3);
        assert_eq!(residency.short_of(Limit::Descriptors(64)), ["three"]);
        assert_eq!(residency.counts(), (2, 2, 3));
    }

    #[test]
    fn running_short_below_the_capacity_lowers_it_to_what_fitted() {
        let residency = Residency::new(10, Limit::Instances(12));
        for id in 0..4 {
            residency.enter(id, &id);
            residency.leave(id);
        }
        residency.enter(4, &4);
        // Four others fitted and the fifth did not: four at most from now on.
        assert_eq!(residency.short_of(Limit::Descriptors(64)).len(), 4);
        assert_eq!(residency.limit(), Limit::Descriptors(64));
        assert_eq!(residency.counts().1, 4);
    }

    #[test]
    fn the_limit_raised_for_some_sessions_holds_them_and_no_more_than_needed() {
        for (sessions, open) in [(2, 10), (38, 20), (221, 12), (998, 40), (10_000, 700)] {
            let soft = descriptors_for(sessions, open);
            assert!(
                sessions_within(soft, open) >= sessions,
                "{sessions}, {open}"
            );
            assert!(
                sessions_within(soft - 8, open) < sessions,
                "{sessions}, {open}"
            );
        }
    }

    #[test]
    fn the_capacity_leaves_descriptors_for_everything_else() {
        let (resident, _) = capacity(Some(1000));
        assert!(resident <= 998, "{resident}");
        if let Some(soft) = descriptor_limit() {
            assert!(
                (resident as u64) * DESCRIPTORS_PER_SESSION < soft,
                "{resident}"
            );
        }
    }
}
