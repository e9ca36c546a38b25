//! The answers the server gives of itself: what `initialize` reports (the engine, its limits)
//! and what `health` reports (quarantines, the breaker, turns served and degraded).

use crate::actor::Shared;
use crate::checks::ProtocolVersion;
use crate::protocol::{self, HealthStatus, SessionReport};
use crate::rpc::RpcError;

/// `initialize`: the protocol spoken, the engine serving and the limits it runs under.
pub(crate) async fn initialize(
    shared: &Shared,
    max_line_bytes: usize,
) -> Result<protocol::InitializeResult, RpcError> {
    let engine = shared.host.active_engine().await?;
    let limits = &engine.spec().limits;
    let limits = protocol::Limits {
        memory_bytes: limits.memory_bytes,
        call_timeout_ms: u64::try_from(limits.call_timeout.as_millis()).unwrap_or(u64::MAX),
        host_bytes_per_call: limits.host_bytes_per_call,
        max_line_bytes,
    };
    Ok(protocol::InitializeResult {
        protocol_version: ProtocolVersion::SPOKEN,
        host: protocol::HostInfo {
            name: "ctxhost",
            version: env!("CARGO_PKG_VERSION"),
        },
        engine: protocol::EngineSummary {
            info: engine.info().clone(),
            contract: engine.contract_version().to_string(),
        },
        context_window: shared.host.compaction_settings().context_window,
        limits,
    })
}

/// `health`: the engine the config selects and the one serving, quarantines and the circuit
/// breaker, turns served and degraded over every session (`open` of them open now), and one
/// session's when `session_key` names it (`known: false` when no turn of it was recorded).
pub(crate) async fn health(
    shared: &Shared,
    open: usize,
    session_key: Option<&str>,
) -> protocol::HealthResult {
    let quarantined: Vec<_> = (shared.host.quarantined().await.into_iter())
        .map(|(engine, cause)| protocol::Quarantined { engine, cause })
        .collect();
    let engine = engine_health(shared).await;
    let degraded: Vec<_> = (shared.health.degraded().into_iter())
        .map(|(session_key, health)| protocol::DegradedSession {
            session_key,
            health,
        })
        .collect();
    let ok = quarantined.is_empty() && engine.circuit_open.is_none() && degraded.is_empty();
    protocol::HealthResult {
        status: if ok {
            HealthStatus::Ok
        } else {
            HealthStatus::Degraded
        },
        engine,
        quarantined,
        sessions: session_counts(shared, open),
        degraded_sessions: degraded,
        session: session_key.map(|key| SessionReport::of(key, shared.health.session(key))),
    }
}

/// The engine the config selects: its contract once loaded, and why its breaker is open.
async fn engine_health(shared: &Shared) -> protocol::EngineHealth {
    let configured = shared.host.config().active_engine().to_string();
    let serving = shared.host.loaded_engine(&configured).await;
    protocol::EngineHealth {
        contract: serving.as_ref().map(|e| e.contract_version().to_string()),
        circuit_open: serving.and_then(|engine| engine.health().circuit_open),
        configured,
    }
}

fn session_counts(shared: &Shared, open: usize) -> protocol::SessionCounts {
    let (recorded, turns, degraded_turns) = shared.health.totals();
    let (resident, resident_limit, evictions) = shared.residency.counts();
    protocol::SessionCounts {
        open,
        recorded,
        turns,
        degraded_turns,
        idle_releases: shared.health.idle_releases(),
        resident,
        resident_limit: resident_limit.min(u32::MAX as usize),
        evictions,
    }
}
