//! The circuit breaker: an engine that faults on several calls in a row is refused, failing
//! fast with the last fault as the reason, until the operator resets it or the process ends.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use super::error::{EngineError, FaultKind};
use super::limits::Function;

#[derive(Debug)]
pub(super) struct Health {
    threshold: u32,
    consecutive_faults: AtomicU32,
    /// The fault that opened the circuit, while it is open.
    open: Mutex<Option<String>>,
}

/// A snapshot for `doctor` and embedding runtimes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthStatus {
    /// Faults in a row since the last good call.
    pub consecutive_faults: u32,
    /// Why the engine is refused, when it is.
    pub circuit_open: Option<String>,
}

impl Health {
    pub(super) fn new(threshold: u32) -> Self {
        Self {
            threshold: threshold.max(1),
            consecutive_faults: AtomicU32::new(0),
            open: Mutex::new(None),
        }
    }

    fn open_reason(&self) -> Option<String> {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Fails fast when the circuit is open.
    pub(super) fn check(
        &self,
        engine: &str,
        function: Function,
        session: &str,
    ) -> Result<(), EngineError> {
        match self.open_reason() {
            None => Ok(()),
            Some(last_fault) => Err(EngineError::CircuitOpen {
                engine: engine.to_string(),
                function,
                session: session.to_string(),
                faults: self.consecutive_faults.load(Ordering::Relaxed),
                last_fault,
            }),
        }
    }

    /// Counts a call's outcome: faults in a row open the circuit; a successful call of the
    /// engine's real work ends the run. Starting an instance (instantiate, info, bootstrap)
    /// does not: an engine that boots fine and then faults on every assemble is still faulting.
    pub(super) fn record<T>(&self, function: Function, result: &Result<T, EngineError>) {
        let lifecycle = matches!(
            function,
            Function::Instantiate | Function::Info | Function::Bootstrap
        );
        match result {
            // One session's resource shortage must not disable every session.
            Err(EngineError::Fault {
                kind: FaultKind::HostResources,
                ..
            }) => {}
            Err(e @ EngineError::Fault { .. }) => {
                let faults = self.consecutive_faults.fetch_add(1, Ordering::Relaxed) + 1;
                if faults >= self.threshold {
                    let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
                    if open.is_none() {
                        tracing::error!(
                            "{e}; {faults} faults in a row: the engine is refused until reset"
                        );
                        *open = Some(e.to_string());
                    }
                }
            }
            Err(EngineError::CircuitOpen { .. }) => {}
            _ if lifecycle => {}
            _ => self.consecutive_faults.store(0, Ordering::Relaxed),
        }
    }

    pub(super) fn reset(&self) {
        self.consecutive_faults.store(0, Ordering::Relaxed);
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    pub(super) fn status(&self) -> HealthStatus {
        HealthStatus {
            consecutive_faults: self.consecutive_faults.load(Ordering::Relaxed),
            circuit_open: self.open_reason(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault() -> Result<(), EngineError> {
        Err(EngineError::Fault {
            engine: "e".into(),
            function: Function::Ingest,
            session: "s".into(),
            kind: FaultKind::Panic,
            detail: "boom".into(),
        })
    }

    #[test]
    fn a_host_shortage_is_not_counted_against_the_engine() {
        let health = Health::new(1);
        let shortage: Result<(), EngineError> = Err(EngineError::Fault {
            engine: "e".into(),
            function: Function::Instantiate,
            session: "s".into(),
            kind: FaultKind::HostResources,
            detail: "maximum concurrent component instance limit of 2 reached".into(),
        });
        for _ in 0..5 {
            health.record(Function::Instantiate, &shortage);
        }
        assert!(health.check("e", Function::Assemble, "s").is_ok());
        assert_eq!(health.status().consecutive_faults, 0);
    }

    #[test]
    fn opens_after_consecutive_faults_and_resets() {
        let health = Health::new(3);
        let work = Function::Assemble;
        health.record(work, &fault());
        health.record(work, &fault());
        health.record(work, &Ok(()));
        health.record(work, &fault());
        health.record(Function::Bootstrap, &Ok(()));
        health.record(work, &fault());
        assert!(health.check("e", Function::Assemble, "s").is_ok());
        health.record(work, &fault());
        let err = health.check("e", Function::Assemble, "s").unwrap_err();
        assert!(
            matches!(err, EngineError::CircuitOpen { faults: 3, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("boom"), "{err}");
        health.reset();
        assert!(health.check("e", Function::Assemble, "s").is_ok());
        assert_eq!(health.status().consecutive_faults, 0);
    }
}
