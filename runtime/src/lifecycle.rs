//! The glue contracts 0.1 and 0.2 share word for word. Their WIT packages are separate, so each
//! has its own generated types, and Rust cannot say "the same conversion between ctxhost's type
//! and either version's type of that name" but with a macro: bindgen's `with` remaps only whole
//! interfaces and resources, and 0.1's interfaces differ from 0.2's in a few types. So these
//! conversions, host imports and lifecycle calls are written once here and expanded in each
//! version's module, and every name an expansion uses is an argument of the call or a `$crate`
//! path: `g` the version's generated `types`, `d` ctxhost's `contract`, `host` the version's host
//! interface, `bindings` its world. Versions after 0.2 include 0.2's interfaces and delegate to
//! `v0_2` instead, so nothing here grows with new versions; they share only
//! `contract_bindings`, the options every version's bindings are generated with.

use wasmtime::Store;

use crate::contract as d;
use crate::state::StoreState;

/// An export's outcome: a trap, or the engine's answer (`Err`: its own message).
pub(crate) type Call<T> = wasmtime::Result<Result<T, String>>;

/// The exports every contract version has but `assemble`, in ctxhost's terms. 0.1's and 0.2's
/// engines implement it ([`engine_exports`]); later versions keep 0.2's `engine` export.
pub(crate) trait Lifecycle {
    /// Who the engine is.
    async fn info(&self, store: &mut Store<StoreState>) -> wasmtime::Result<d::EngineInfo>;
    /// The instance's first call.
    async fn bootstrap(
        &self,
        store: &mut Store<StoreState>,
        request: &d::BootstrapRequest,
    ) -> Call<d::BootstrapResult>;
    /// One new message.
    async fn ingest(
        &self,
        store: &mut Store<StoreState>,
        session: &d::SessionIdentity,
        message: &d::Message,
        is_heartbeat: bool,
    ) -> Call<d::IngestResult>;
    /// Several new messages; how many were ingested.
    async fn ingest_batch(
        &self,
        store: &mut Store<StoreState>,
        session: &d::SessionIdentity,
        messages: &[d::Message],
        is_heartbeat: bool,
    ) -> Call<u32>;
    /// Make the context smaller.
    async fn compact(
        &self,
        store: &mut Store<StoreState>,
        request: &d::CompactRequest,
    ) -> Call<d::CompactResult>;
    /// A turn ended.
    async fn after_turn(
        &self,
        store: &mut Store<StoreState>,
        request: &d::AfterTurnRequest,
    ) -> Call<()>;
    /// A subagent is about to be spawned; the handle to roll it back, if any.
    async fn prepare_subagent_spawn(
        &self,
        store: &mut Store<StoreState>,
        spawn: &d::SubagentSpawn,
    ) -> Call<Option<u64>>;
    /// The spawn failed.
    async fn rollback_subagent_spawn(&self, store: &mut Store<StoreState>, handle: u64)
    -> Call<()>;
    /// A subagent's session ended.
    async fn on_subagent_ended(
        &self,
        store: &mut Store<StoreState>,
        child_session_key: &str,
        reason: d::SubagentEndReason,
    ) -> Call<()>;
    /// The instance is about to be dropped.
    async fn dispose(
        &self,
        store: &mut Store<StoreState>,
        session: &d::SessionIdentity,
    ) -> Call<()>;
}

/// One contract version's generated bindings, with the options every version binds with
/// (imports async and able to trap, exports async); `with` names the interfaces an older
/// version's bindings already hold. A macro because `bindgen!` takes its options as tokens.
macro_rules! contract_bindings {
    ($path:literal $(, with: { $($with:tt)* })?) => {
        wasmtime::component::bindgen!({
            path: $path,
            world: "context-engine",
            imports: { default: async | trappable },
            exports: { default: async },
            anyhow: true,
            $(with: { $($with)* },)?
        });
    };
}
pub(crate) use contract_bindings;

/// Converts a WIT enum of a version's generated `types` (`g`) to and from ctxhost's own
/// (`d`, `crate::contract`), variant by variant: the variants are named alike, which only a
/// macro can match on.
macro_rules! convert_enum {
    ($g:ident, $d:ident, $name:ident [$($variant:ident),* $(,)?]) => {
        impl From<$d::$name> for $g::$name {
            fn from(value: $d::$name) -> Self {
                match value {
                    $($d::$name::$variant => Self::$variant,)*
                }
            }
        }
        impl From<$g::$name> for $d::$name {
            fn from(value: $g::$name) -> Self {
                match value {
                    $($g::$name::$variant => Self::$variant,)*
                }
            }
        }
    };
}
pub(crate) use convert_enum;

/// Enum conversions, `session` both ways, `host-error` to the guest and `compaction` from it.
macro_rules! shared_conversions {
    ($g:ident, $d:ident) => {
        $crate::lifecycle::convert_enum!($g, $d, Role [User, Assistant, ToolResult, BashExecution, Custom, BranchSummary, CompactionSummary]);
        $crate::lifecycle::convert_enum!($g, $d, CompactionTrigger [Manual, Auto, Overflow]);
        $crate::lifecycle::convert_enum!($g, $d, ContextMode [Isolated, Fork]);
        $crate::lifecycle::convert_enum!($g, $d, SubagentEndReason [Deleted, Completed, Swept, Released]);

        impl From<&$d::SessionIdentity> for $g::Session {
            fn from(s: &$d::SessionIdentity) -> Self {
                Self {
                    id: s.id.clone(),
                    key: s.key.clone(),
                }
            }
        }

        impl From<$g::Session> for $d::SessionIdentity {
            fn from(s: $g::Session) -> Self {
                Self {
                    id: s.id,
                    key: s.key,
                }
            }
        }

        impl From<$d::HostError> for $g::HostError {
            fn from(e: $d::HostError) -> Self {
                match e {
                    $d::HostError::PermissionDenied(m) => Self::PermissionDenied(m),
                    $d::HostError::InvalidArgument(m) => Self::InvalidArgument(m),
                    $d::HostError::Unavailable(m) => Self::Unavailable(m),
                    $d::HostError::Failed(m) => Self::Failed(m),
                }
            }
        }

        /// A compaction as the guest returns it (0.1's rotation fields, never acted on, are
        /// dropped here).
        impl From<$g::Compaction> for $d::Compaction {
            fn from(c: $g::Compaction) -> Self {
                Self {
                    summary: c.summary,
                    first_kept_entry: c.first_kept_entry,
                    tokens_before: c.tokens_before,
                    tokens_after: c.tokens_after,
                    details: c.details,
                }
            }
        }
    };
}
pub(crate) use shared_conversions;

/// `message` to the guest, with the fields this version adds to 0.1's (`tool_call_id` in 0.2).
macro_rules! message_to_guest {
    ($g:ident, $d:ident $(, $added:ident)* $(,)?) => {
        impl From<&$d::Message> for $g::Message {
            fn from(m: &$d::Message) -> Self {
                Self {
                    entry: m.entry,
                    entry_id: m.entry_id.clone(),
                    role: m.role.into(),
                    timestamp: m.timestamp,
                    text: m.text.clone(),
                    tool_calls: m
                        .tool_calls
                        .iter()
                        .map(|c| $g::ToolCall {
                            id: c.id.clone(),
                            name: c.name.clone(),
                            arguments: c.arguments.clone(),
                        })
                        .collect(),
                    tool_name: m.tool_name.clone(),
                    $($added: m.$added.clone(),)*
                    is_error: m.is_error,
                    stop_reason: m.stop_reason.clone(),
                    usage: m.usage.map(|u| $g::Usage {
                        input: u.input,
                        output: u.output,
                        cache_read: u.cache_read,
                        cache_write: u.cache_write,
                        total_tokens: u.total_tokens,
                    }),
                    tokens: m.tokens,
                    json: m.json.clone(),
                }
            }
        }
    };
}
pub(crate) use message_to_guest;

/// The host imports both versions answer the same way, as items of the version's
/// `impl host::Host`.
macro_rules! shared_host_imports {
    ($host:ident, $g:ident, $d:ident) => {
        async fn log(&mut self, level: $host::LogLevel, message: String) -> anyhow::Result<()> {
            let level = match level {
                $host::LogLevel::Trace => $d::LogLevel::Trace,
                $host::LogLevel::Debug => $d::LogLevel::Debug,
                $host::LogLevel::Info => $d::LogLevel::Info,
                $host::LogLevel::Warn => $d::LogLevel::Warn,
                $host::LogLevel::Error => $d::LogLevel::Error,
            };
            self.import_log(level, &message)
        }

        async fn estimate_tokens(&mut self, text: String) -> anyhow::Result<u32> {
            self.import_estimate_tokens(&text)
        }

        async fn read_entries(
            &mut self,
            entries: Vec<$d::EntryRef>,
        ) -> anyhow::Result<Result<Vec<$g::Message>, $g::HostError>> {
            Ok(self
                .import_read_entries(&entries)
                .await?
                .map(|messages| messages.iter().map(Into::into).collect())
                .map_err(Into::into))
        }

        async fn delegate_compaction(
            &mut self,
            request: $g::CompactRequest,
        ) -> anyhow::Result<Result<Option<$g::Compaction>, $g::HostError>> {
            Ok(self
                .import_delegate_compaction(request.into())
                .await?
                .map(|c| c.map(Into::into))
                .map_err(Into::into))
        }

        async fn config(&mut self) -> anyhow::Result<String> {
            self.import_config()
        }

        async fn complete(
            &mut self,
            request: $host::CompletionRequest,
        ) -> anyhow::Result<Result<String, $g::HostError>> {
            let request = $d::CompletionRequest {
                system: request.system,
                prompt: request.prompt,
                max_tokens: request.max_tokens,
            };
            Ok(self.import_complete(request).await?.map_err(Into::into))
        }
    };
}
pub(crate) use shared_host_imports;

/// A version's `Engine`, wrapping its world's `ContextEngine`: how it is loaded, and every
/// export but `assemble` (whose request and plan differ) as its [`Lifecycle`].
macro_rules! engine_exports {
    ($engine:ident, $bindings:ident, $g:ident, $d:ident) => {
        impl $engine {
            pub(super) fn load(
                indices: &$bindings::ContextEngineIndices,
                store: &mut wasmtime::Store<$crate::state::StoreState>,
                instance: &wasmtime::component::Instance,
            ) -> wasmtime::Result<Self> {
                indices.load(store, instance).map(Self)
            }

            fn exports(&self) -> &$bindings::exports::ctxhost::engine::engine::Guest {
                self.0.ctxhost_engine_engine()
            }
        }

        impl $crate::lifecycle::Lifecycle for $engine {
            async fn info(
                &self,
                store: &mut wasmtime::Store<$crate::state::StoreState>,
            ) -> wasmtime::Result<$d::EngineInfo> {
                let info = self.exports().call_info(store).await?;
                Ok($d::EngineInfo {
                    id: info.id,
                    name: info.name,
                    version: info.version,
                    owns_compaction: info.owns_compaction,
                })
            }

            async fn bootstrap(
                &self,
                store: &mut wasmtime::Store<$crate::state::StoreState>,
                request: &$d::BootstrapRequest,
            ) -> wasmtime::Result<Result<$d::BootstrapResult, String>> {
                let request = $g::BootstrapRequest {
                    session: (&request.session).into(),
                    session_file: request.session_file.clone(),
                    entry_count: request.entry_count,
                };
                let result = self.exports().call_bootstrap(store, &request).await?;
                Ok(result.map(|r| $d::BootstrapResult {
                    bootstrapped: r.bootstrapped,
                    imported_messages: r.imported_messages,
                    reason: r.reason,
                }))
            }

            async fn ingest(
                &self,
                store: &mut wasmtime::Store<$crate::state::StoreState>,
                session: &$d::SessionIdentity,
                message: &$d::Message,
                is_heartbeat: bool,
            ) -> wasmtime::Result<Result<$d::IngestResult, String>> {
                let result = self
                    .exports()
                    .call_ingest(store, &session.into(), &message.into(), is_heartbeat)
                    .await?;
                Ok(result.map(|r| $d::IngestResult {
                    ingested: r.ingested,
                }))
            }

            async fn ingest_batch(
                &self,
                store: &mut wasmtime::Store<$crate::state::StoreState>,
                session: &$d::SessionIdentity,
                messages: &[$d::Message],
                is_heartbeat: bool,
            ) -> wasmtime::Result<Result<u32, String>> {
                let messages: Vec<$g::Message> = messages.iter().map(Into::into).collect();
                self.exports()
                    .call_ingest_batch(store, &session.into(), &messages, is_heartbeat)
                    .await
            }

            async fn compact(
                &self,
                store: &mut wasmtime::Store<$crate::state::StoreState>,
                request: &$d::CompactRequest,
            ) -> wasmtime::Result<Result<$d::CompactResult, String>> {
                let result = self.exports().call_compact(store, &request.into()).await?;
                Ok(result.map(|r| $d::CompactResult {
                    ok: r.ok,
                    compacted: r.compacted,
                    reason: r.reason,
                    compaction: r.compaction.map(Into::into),
                }))
            }

            async fn after_turn(
                &self,
                store: &mut wasmtime::Store<$crate::state::StoreState>,
                request: &$d::AfterTurnRequest,
            ) -> wasmtime::Result<Result<(), String>> {
                let request = $g::AfterTurnRequest {
                    session: (&request.session).into(),
                    session_file: request.session_file.clone(),
                    pre_prompt_message_count: request.pre_prompt_message_count,
                    message_count: request.message_count,
                    auto_compaction_summary: request.auto_compaction_summary.clone(),
                    is_heartbeat: request.is_heartbeat,
                    token_budget: request.token_budget,
                };
                self.exports().call_after_turn(store, &request).await
            }

            async fn prepare_subagent_spawn(
                &self,
                store: &mut wasmtime::Store<$crate::state::StoreState>,
                spawn: &$d::SubagentSpawn,
            ) -> wasmtime::Result<Result<Option<u64>, String>> {
                let spawn = $g::SubagentSpawn {
                    parent_session_key: spawn.parent_session_key.clone(),
                    child_session_key: spawn.child_session_key.clone(),
                    context_mode: spawn.context_mode.into(),
                    ttl_ms: spawn.ttl_ms,
                };
                self.exports()
                    .call_prepare_subagent_spawn(store, &spawn)
                    .await
            }

            async fn rollback_subagent_spawn(
                &self,
                store: &mut wasmtime::Store<$crate::state::StoreState>,
                handle: u64,
            ) -> wasmtime::Result<Result<(), String>> {
                self.exports()
                    .call_rollback_subagent_spawn(store, handle)
                    .await
            }

            async fn on_subagent_ended(
                &self,
                store: &mut wasmtime::Store<$crate::state::StoreState>,
                child_session_key: &str,
                reason: $d::SubagentEndReason,
            ) -> wasmtime::Result<Result<(), String>> {
                self.exports()
                    .call_on_subagent_ended(store, child_session_key, reason.into())
                    .await
            }

            async fn dispose(
                &self,
                store: &mut wasmtime::Store<$crate::state::StoreState>,
                session: &$d::SessionIdentity,
            ) -> wasmtime::Result<Result<(), String>> {
                self.exports().call_dispose(store, &session.into()).await
            }
        }
    };
}
pub(crate) use engine_exports;
