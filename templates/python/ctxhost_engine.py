"""Defaults for every export of the ctxhost:engine contract (0.2.0), so an engine overrides only
what it changes. `assemble` gets the context as columns (`request.context`: `entries`, `roles`,
`tokens`, `tools` indexing `tool_names`, `flags` with `is_error` and `pruned`), plus `model` and
`prompt` when the runtime named them; a tool result's call id comes from `host.tool_call_ids`.
A fresh instance of an existing session is not re-fed its old messages. Written by `ctxhost plugins new --lang python`; `app.py` subclasses `DefaultEngine`.

Traps of componentize-py, handled here and worth knowing:
- Import modules at the top of a file, never inside a method: the component is snapshotted at
  build time and an import at call time fails.
- An error is `raise Err("message")` (componentize_py_types.Err) with a string; any other
  exception traps, and the host then discards the instance.
- Keep per-session state in module globals, not on `self`: componentize-py, not the engine,
  decides when the exported class is instantiated. One component instance serves one session.
"""

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host, types


def keep_all(context, start=0):
    """Keeps the context's entries from position `start` on, in order, with the host's token
    counts: one `keep-range` item however many entries it spans. `context` is the request's
    columns: `context.entries[i]`, `context.roles[i]`, `context.tokens[i]` describe entry i."""
    entries = context.entries[start:]
    if not entries:
        items = []
    elif len(entries) == 1:
        items = [types.ContextItem_Keep(entries[0])]
    else:
        run = types.KeepRange(first=entries[0], last=entries[-1])
        items = [types.ContextItem_KeepRange(run)]
    return types.AssembleResult(
        items=items,
        estimated_tokens=sum(context.tokens[start:]),
        system_prompt_addition=None,
    )


def delegate_compact(request):
    """The host's built-in compaction (prune, then summarize), wrapped as a compact result."""
    try:
        compaction = host.delegate_compaction(request)
    except Err as error:
        return types.CompactResult(
            ok=False,
            compacted=False,
            reason=f"delegate-compaction failed: {error.value}",
            compaction=None,
        )
    if compaction is None:
        return types.CompactResult(
            ok=True, compacted=False, reason="nothing to compact", compaction=None
        )
    return types.CompactResult(ok=True, compacted=True, reason=None, compaction=compaction)


def log(level, message):
    host.log(level, str(message))


class DefaultEngine(exports.Engine):
    """A pass-through engine that keeps no state and leaves compaction to the host."""

    def info(self) -> types.EngineInfo:
        raise Err("info() is not implemented")

    def bootstrap(self, request: types.BootstrapRequest) -> types.BootstrapResult:
        return types.BootstrapResult(
            bootstrapped=False, imported_messages=None, reason="engine keeps no state"
        )

    def ingest(self, session, message, is_heartbeat) -> types.IngestResult:
        return types.IngestResult(ingested=False)

    def ingest_batch(self, session, messages, is_heartbeat) -> int:
        return sum(1 for m in messages if self.ingest(session, m, is_heartbeat).ingested)

    def assemble(self, request: types.AssembleRequest) -> types.AssembleResult:
        return keep_all(request.context)

    def compact(self, request: types.CompactRequest) -> types.CompactResult:
        return delegate_compact(request)

    def after_turn(self, request: types.AfterTurnRequest) -> None:
        return None

    def prepare_subagent_spawn(self, spawn: types.SubagentSpawn):
        return None

    def rollback_subagent_spawn(self, handle: int) -> None:
        return None

    def on_subagent_ended(self, child_session_key: str, reason) -> None:
        return None

    def dispose(self, session: types.Session) -> None:
        return None
