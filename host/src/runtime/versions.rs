//! The one place that knows which contract versions exist. Each version's module binds its
//! own WIT and converts into ctxhost's types; these enums pick the module by the version a
//! component exports. Supporting another version adds a module and one arm per match here.

use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{Engine, Store};

use super::contract as d;
use super::state::StoreState;
use super::{RuntimeError, v0_1, v0_2};

/// Contract versions this host runs, newest first.
pub(super) const SUPPORTED: &[&str] = &[v0_2::VERSION, v0_1::VERSION];

/// Adds every version's host imports (each under its own versioned interface name).
pub(super) fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    v0_1::add_to_linker(linker)?;
    v0_2::add_to_linker(linker)
}

/// A component linked against the imports of the version it was built for.
pub(super) enum Pre {
    V0_1(v0_1::Pre),
    V0_2(v0_2::Pre),
}

impl Pre {
    /// `version` is one of [`SUPPORTED`] (compatible by minor), as `contract_version` checked.
    pub(super) fn new(
        linker: &Linker<StoreState>,
        component: &Component,
        version: &str,
    ) -> wasmtime::Result<Self> {
        let pre: InstancePre<StoreState> = linker.instantiate_pre(component)?;
        if same_minor(v0_2::VERSION, version) {
            v0_2::pre(pre).map(Self::V0_2)
        } else {
            v0_1::pre(pre).map(Self::V0_1)
        }
    }

    pub(super) async fn instantiate(
        &self,
        store: &mut Store<StoreState>,
    ) -> wasmtime::Result<Bindings> {
        Ok(match self {
            Self::V0_1(pre) => Bindings::V0_1(v0_1::Engine::instantiate(pre, store).await?),
            Self::V0_2(pre) => Bindings::V0_2(v0_2::Engine::instantiate(pre, store).await?),
        })
    }
}

/// A live instance's exports, whichever version it speaks.
pub(super) enum Bindings {
    V0_1(v0_1::Engine),
    V0_2(v0_2::Engine),
}

type Call<T> = wasmtime::Result<Result<T, String>>;

impl Bindings {
    pub(super) async fn info(
        &self,
        store: &mut Store<StoreState>,
    ) -> wasmtime::Result<d::EngineInfo> {
        match self {
            Self::V0_1(e) => e.info(store).await,
            Self::V0_2(e) => e.info(store).await,
        }
    }

    pub(super) async fn bootstrap(
        &self,
        store: &mut Store<StoreState>,
        request: &d::BootstrapRequest,
    ) -> Call<d::BootstrapResult> {
        match self {
            Self::V0_1(e) => e.bootstrap(store, request).await,
            Self::V0_2(e) => e.bootstrap(store, request).await,
        }
    }

    pub(super) async fn ingest(
        &self,
        store: &mut Store<StoreState>,
        session: &d::Session,
        message: &d::Message,
        is_heartbeat: bool,
    ) -> Call<d::IngestResult> {
        match self {
            Self::V0_1(e) => e.ingest(store, session, message, is_heartbeat).await,
            Self::V0_2(e) => e.ingest(store, session, message, is_heartbeat).await,
        }
    }

    pub(super) async fn ingest_batch(
        &self,
        store: &mut Store<StoreState>,
        session: &d::Session,
        messages: &[d::Message],
        is_heartbeat: bool,
    ) -> Call<u32> {
        match self {
            Self::V0_1(e) => e.ingest_batch(store, session, messages, is_heartbeat).await,
            Self::V0_2(e) => e.ingest_batch(store, session, messages, is_heartbeat).await,
        }
    }

    pub(super) async fn assemble(
        &self,
        store: &mut Store<StoreState>,
        request: &d::AssembleRequest,
    ) -> Call<d::AssembleResult> {
        match self {
            Self::V0_1(e) => e.assemble(store, request).await,
            Self::V0_2(e) => e.assemble(store, request).await,
        }
    }

    pub(super) async fn compact(
        &self,
        store: &mut Store<StoreState>,
        request: &d::CompactRequest,
    ) -> Call<d::CompactResult> {
        match self {
            Self::V0_1(e) => e.compact(store, request).await,
            Self::V0_2(e) => e.compact(store, request).await,
        }
    }

    pub(super) async fn after_turn(
        &self,
        store: &mut Store<StoreState>,
        request: &d::AfterTurnRequest,
    ) -> Call<()> {
        match self {
            Self::V0_1(e) => e.after_turn(store, request).await,
            Self::V0_2(e) => e.after_turn(store, request).await,
        }
    }

    pub(super) async fn prepare_subagent_spawn(
        &self,
        store: &mut Store<StoreState>,
        spawn: &d::SubagentSpawn,
    ) -> Call<Option<u64>> {
        match self {
            Self::V0_1(e) => e.prepare_subagent_spawn(store, spawn).await,
            Self::V0_2(e) => e.prepare_subagent_spawn(store, spawn).await,
        }
    }

    pub(super) async fn rollback_subagent_spawn(
        &self,
        store: &mut Store<StoreState>,
        handle: u64,
    ) -> Call<()> {
        match self {
            Self::V0_1(e) => e.rollback_subagent_spawn(store, handle).await,
            Self::V0_2(e) => e.rollback_subagent_spawn(store, handle).await,
        }
    }

    pub(super) async fn on_subagent_ended(
        &self,
        store: &mut Store<StoreState>,
        child_session_key: &str,
        reason: d::SubagentEndReason,
    ) -> Call<()> {
        match self {
            Self::V0_1(e) => e.on_subagent_ended(store, child_session_key, reason).await,
            Self::V0_2(e) => e.on_subagent_ended(store, child_session_key, reason).await,
        }
    }

    pub(super) async fn dispose(
        &self,
        store: &mut Store<StoreState>,
        session: &d::Session,
    ) -> Call<()> {
        match self {
            Self::V0_1(e) => e.dispose(store, session).await,
            Self::V0_2(e) => e.dispose(store, session).await,
        }
    }
}

/// Reads the `ctxhost:engine` version a component exports, and refuses unsupported ones.
pub(super) fn contract_version(
    engine: &Engine,
    component: &Component,
    origin: &str,
) -> Result<String, RuntimeError> {
    let ty = component.component_type();
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    let found = exports
        .iter()
        .find_map(|name| name.strip_prefix("ctxhost:engine/engine@"))
        .ok_or_else(|| RuntimeError::NotAnEngine {
            origin: origin.to_string(),
            exports: if exports.is_empty() {
                "none".into()
            } else {
                exports.join(", ")
            },
        })?;
    if SUPPORTED.iter().any(|v| same_minor(v, found)) {
        Ok(found.to_string())
    } else {
        Err(RuntimeError::UnsupportedContract {
            origin: origin.to_string(),
            found: found.to_string(),
            supported: SUPPORTED.join(", "),
        })
    }
}

/// Component-model semver: `0.1.x` versions are interchangeable, `0.2` is not (the host
/// matches on major and minor at every major). Not a full version (`0.1`) matches nothing.
fn same_minor(supported: &str, found: &str) -> bool {
    match (
        semver::Version::parse(supported),
        semver::Version::parse(found),
    ) {
        (Ok(supported), Ok(found)) => {
            (supported.major, supported.minor) == (found.major, found.minor)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_versions_match_on_minor() {
        assert!(same_minor("0.1.0", "0.1.0"));
        assert!(same_minor("0.1.0", "0.1.3"));
        assert!(!same_minor("0.1.0", "0.2.0"));
        assert!(!same_minor("0.1.0", "0.1"));
        assert!(!same_minor("0.1.0", "0.1.x"));
        assert!(same_minor("0.1.0", "0.1.1-rc.1"));
        assert!(!same_minor("1.1.0", "1.2.0"));
    }
}
