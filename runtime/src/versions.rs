//! The one place that knows which contract versions exist. Each version's module binds its
//! own WIT and converts into ctxhost's types; these types pick the module by the version a
//! component exports. A version that only adds interfaces (0.3: `tools`, `recall`; 0.4:
//! `incremental`) adds its module, its imports to the linker and a variant of its exports here;
//! the lifecycle calls are forwarded by one macro, with one arm per version whose `engine`
//! interface differs, and `assemble` goes to 0.4's `incremental` when the engine has it.

use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{Engine, Store};

use super::contract as d;
use super::error::RuntimeError;
use super::lifecycle::{Call, Lifecycle};
use super::plan;
use super::state::StoreState;
use super::{v0_1, v0_2, v0_3, v0_4};

/// Contract versions this host runs, newest first.
pub(super) const SUPPORTED: &[&str] = &[v0_4::VERSION, v0_3::VERSION, v0_2::VERSION, v0_1::VERSION];

/// Adds every version's host imports (each under its own versioned interface name).
pub(super) fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    v0_1::add_to_linker(linker)?;
    v0_2::add_to_linker(linker)?;
    v0_3::add_to_linker(linker)
}

/// A component linked against the imports of the version it was built for, with its exports
/// looked up once.
pub(super) struct Pre {
    instance_pre: InstancePre<StoreState>,
    exports: Exports,
}

/// The exports a component of each version has, looked up once: a version after 0.2 keeps
/// 0.2's `engine` and adds interfaces (0.3 `tools`, 0.4 `incremental` beside them).
enum Exports {
    V0_1(v0_1::Indices),
    V0_2(v0_2::Indices),
    V0_3(v0_2::Indices, v0_3::ToolsIndices),
    V0_4(v0_2::Indices, v0_3::ToolsIndices, v0_4::IncrementalIndices),
}

impl Pre {
    /// `version` is one of [`SUPPORTED`] (compatible by minor), as `contract_version` checked.
    pub(super) fn new(
        linker: &Linker<StoreState>,
        component: &Component,
        version: &str,
    ) -> wasmtime::Result<Self> {
        let instance_pre: InstancePre<StoreState> = linker.instantiate_pre(component)?;
        let pre = &instance_pre;
        let exports = if same_minor(v0_1::VERSION, version) {
            Exports::V0_1(v0_1::indices(pre)?)
        } else if same_minor(v0_2::VERSION, version) {
            Exports::V0_2(v0_2::indices(pre)?)
        } else if same_minor(v0_3::VERSION, version) {
            Exports::V0_3(v0_2::indices(pre)?, v0_3::ToolsIndices::new(pre)?)
        } else {
            Exports::V0_4(
                v0_2::indices(pre)?,
                v0_3::ToolsIndices::new(pre)?,
                v0_4::IncrementalIndices::new(pre)?,
            )
        };
        Ok(Self {
            instance_pre,
            exports,
        })
    }

    pub(super) async fn instantiate(
        &self,
        store: &mut Store<StoreState>,
    ) -> wasmtime::Result<Bindings> {
        let instance = self.instance_pre.instantiate_async(&mut *store).await?;
        let at = &instance;
        Ok(match &self.exports {
            Exports::V0_1(engine) => Bindings::V0_1(v0_1::Engine::load(engine, store, at)?),
            Exports::V0_2(engine) => Bindings::V0_2(v0_2::Engine::load(engine, store, at)?),
            Exports::V0_3(engine, tools) => Bindings::V0_3(
                v0_2::Engine::load(engine, store, at)?,
                tools.load(store, at)?,
            ),
            Exports::V0_4(engine, tools, incremental) => Bindings::V0_4(
                v0_2::Engine::load(engine, store, at)?,
                tools.load(store, at)?,
                incremental.load(store, at)?,
            ),
        })
    }
}

/// A live instance's exports, whichever version it speaks.
pub(super) enum Bindings {
    V0_1(v0_1::Engine),
    V0_2(v0_2::Engine),
    V0_3(v0_2::Engine, v0_3::Tools),
    V0_4(v0_2::Engine, v0_3::Tools, v0_4::Incremental),
}

/// Forwards each lifecycle export to the version's module.
macro_rules! forward {
    ($(fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        impl Bindings {
            $(
                pub(super) async fn $name(
                    &self,
                    store: &mut Store<StoreState>,
                    $($arg: $ty),*
                ) -> $ret {
                    match self {
                        Self::V0_1(e) => e.$name(store, $($arg),*).await,
                        Self::V0_2(e) | Self::V0_3(e, _) | Self::V0_4(e, _, _) => {
                            e.$name(store, $($arg),*).await
                        }
                    }
                }
            )*
        }
    };
}

forward! {
    fn info() -> wasmtime::Result<d::EngineInfo>;
    fn bootstrap(request: &d::BootstrapRequest) -> Call<d::BootstrapResult>;
    fn ingest(session: &d::SessionIdentity, message: &d::Message, is_heartbeat: bool) -> Call<d::IngestResult>;
    fn ingest_batch(session: &d::SessionIdentity, messages: &[d::Message], is_heartbeat: bool) -> Call<u32>;
    fn compact(request: &d::CompactRequest) -> Call<d::CompactResult>;
    fn after_turn(request: &d::AfterTurnRequest) -> Call<()>;
    fn prepare_subagent_spawn(spawn: &d::SubagentSpawn) -> Call<Option<u64>>;
    fn rollback_subagent_spawn(handle: u64) -> Call<()>;
    fn on_subagent_ended(child_session_key: &str, reason: d::SubagentEndReason) -> Call<()>;
    fn dispose(session: &d::SessionIdentity) -> Call<()>;
}

impl Bindings {
    /// `assemble`, sent as the change since the engine's last one when it speaks 0.4 (so it
    /// takes `&mut self`: the instance remembers what its engine holds). The plan comes back
    /// as answered, for `plan` to read.
    pub(super) async fn assemble(
        &mut self,
        store: &mut Store<StoreState>,
        request: &d::AssembleRequest,
    ) -> Call<plan::Answer> {
        match self {
            Self::V0_1(e) => e.assemble(store, request).await,
            Self::V0_2(e) | Self::V0_3(e, _) => e.assemble(store, request).await,
            Self::V0_4(_, _, incremental) => incremental.assemble(store, request).await,
        }
    }

    /// The engine's `tools` export (0.3 on); `None` for engines that cannot offer tools.
    pub(super) fn tools(&self) -> Option<&v0_3::Tools> {
        match self {
            Self::V0_3(_, tools) | Self::V0_4(_, tools, _) => Some(tools),
            Self::V0_1(_) | Self::V0_2(_) => None,
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
    // A 0.4 engine exports 0.2's `engine`, 0.3's `tools` and 0.4's `incremental`: the newest
    // names the version.
    let found = [v0_4::INCREMENTAL_EXPORT_PREFIX, v0_3::TOOLS_EXPORT_PREFIX]
        .iter()
        .find_map(|prefix| exports.iter().find_map(|name| name.strip_prefix(prefix)))
        .or_else(|| {
            exports
                .iter()
                .find_map(|name| name.strip_prefix("ctxhost:engine/engine@"))
        })
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
