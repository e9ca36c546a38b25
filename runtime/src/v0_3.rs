//! Contract `ctxhost:engine@0.3.0` (`wit/0.3.0`): 0.2's interfaces unchanged plus
//! the `tools` export and the `recall` import. Only those two are bound here; 0.2's types and
//! host imports are 0.2's own bindings (`with`), and a 0.3 engine's lifecycle exports are
//! driven by `v0_2`, so nothing of 0.2's glue is repeated.

use wasmtime::Store;
use wasmtime::component::{Instance, InstancePre};

use super::contract as d;
use super::state::StoreState;
use super::v0_2::bindings::ctxhost::engine::types as g;

/// Shared with 0.4, which includes 0.3's interfaces unchanged.
pub(super) mod bindings {
    crate::lifecycle::contract_bindings!("../wit/0.3.0", with: {
        "ctxhost:engine/types@0.2.0": crate::v0_2::bindings::ctxhost::engine::types,
        "ctxhost:engine/host@0.2.0": crate::v0_2::bindings::ctxhost::engine::host,
    });
}

use bindings::ctxhost::engine0_3_0::recall;
use bindings::exports::ctxhost::engine0_3_0::tools;

/// The contract version this module speaks.
pub(super) const VERSION: &str = "0.3.0";

/// The export whose presence makes a component a 0.3 engine (beside 0.2's `engine`).
pub(super) const TOOLS_EXPORT_PREFIX: &str = "ctxhost:engine/tools@";

/// Adds the imports 0.3 adds (0.2's are added by `v0_2`).
pub(super) fn add_to_linker(
    linker: &mut wasmtime::component::Linker<StoreState>,
) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    recall::add_to_linker::<StoreState, HasSelf<StoreState>>(linker, |s| s)
}

/// Where a 0.3 engine's `tools` export is, found once per engine.
pub(super) struct ToolsIndices(tools::GuestIndices);

impl ToolsIndices {
    pub(super) fn new(pre: &InstancePre<StoreState>) -> wasmtime::Result<Self> {
        tools::GuestIndices::new(pre).map(Self)
    }

    pub(super) fn load(
        &self,
        store: &mut Store<StoreState>,
        instance: &Instance,
    ) -> wasmtime::Result<Tools> {
        self.0.load(store, instance).map(Tools)
    }
}

/// A live 0.3 instance's `tools` export, in ctxhost's terms.
pub(super) struct Tools(tools::Guest);

impl Tools {
    pub(super) async fn list_tools(
        &self,
        store: &mut Store<StoreState>,
    ) -> wasmtime::Result<Result<Vec<d::EngineTool>, String>> {
        let listed = self.0.call_list_tools(store).await?;
        Ok(Ok(listed
            .into_iter()
            .map(|t| d::EngineTool {
                name: t.name,
                description: t.description,
                parameters: t.parameters,
            })
            .collect()))
    }

    pub(super) async fn call_tool(
        &self,
        store: &mut Store<StoreState>,
        name: &str,
        arguments: &str,
    ) -> wasmtime::Result<Result<d::EngineToolOutput, String>> {
        let result = self.0.call_call_tool(store, name, arguments).await?;
        Ok(result.map(|o| d::EngineToolOutput {
            content: o.content,
            is_error: o.is_error,
        }))
    }
}

impl recall::Host for StoreState {
    async fn search(
        &mut self,
        request: recall::SearchRequest,
    ) -> anyhow::Result<Result<Vec<recall::Hit>, g::HostError>> {
        let request = d::SearchRequest {
            query: request.query,
            role: request.role,
            tool: request.tool,
            is_error: request.is_error,
            limit: request.limit,
        };
        Ok(self
            .import_search(request)
            .await?
            .map(|hits| {
                hits.into_iter()
                    .map(|h| recall::Hit {
                        entry: h.entry,
                        entry_id: h.entry_id,
                        role: h.role,
                        timestamp: h.timestamp,
                        snippet: h.snippet,
                    })
                    .collect()
            })
            .map_err(Into::into))
    }
}
