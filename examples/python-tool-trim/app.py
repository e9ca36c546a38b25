"""tool-trim: a ctxhost context engine (contract 0.2) that trims old tool outputs.

On every `assemble` it keeps the context as the host has it, except that the output of each tool
result older than the newest `keepRecentToolResults` is replaced by a one-line placeholder tool
result. The placeholder keeps the tool-call id, the tool's name and the error flag, so the model
still sees every call answered. Small outputs (under `minTokens`) and outputs a compaction
already pruned are kept verbatim. Compaction is left to the host (`delegate-compaction`).

Traps of componentize-py this file respects:
- every export of the contract is implemented (a missing one fails the build or traps);
- every import is at the top of the file: an import inside a method fails at run time;
- errors are `raise Err("message")`; any other exception traps and the host discards the instance;
- per-session state lives in module globals (one component instance serves one session).
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host, types

ENGINE_ID = "tool-trim"

DEFAULT_KEEP_RECENT = 4
DEFAULT_MIN_TOKENS = 100

# The context's columns carry a role as its position in the WIT enum (the Python enum's value)
# and an entry's flags as bits.
TOOL_RESULT = types.Role.TOOL_RESULT.value
FLAG_IS_ERROR = 1
FLAG_PRUNED = 2

# Per-session state: one component instance serves one session.
CONFIG = None
INGESTED = 0


def config():
    """`plugins.entries.tool-trim.config`, already validated by the host against configSchema."""
    global CONFIG
    if CONFIG is None:
        raw = json.loads(host.config())
        CONFIG = {
            "keep_recent": raw.get("keepRecentToolResults", DEFAULT_KEEP_RECENT),
            "min_tokens": raw.get("minTokens", DEFAULT_MIN_TOKENS),
        }
    return CONFIG


def estimate_tokens(text):
    """The host's estimate (chars / 4, rounded up), computed here to spare an import per item."""
    return (len(text) + 3) // 4


def placeholder(call_id, tool_name, tokens, is_error):
    """A tool result answering call `call_id`, its output replaced by one line."""
    text = f"[tool-trim: the output of {tool_name} was trimmed ({tokens} tokens)]"
    message = {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": tool_name,
        "content": [{"type": "text", "text": text}],
        "isError": is_error,
    }
    return json.dumps(message, separators=(",", ":")), estimate_tokens(text)


def trimmable(context, keep_recent, min_tokens):
    """Positions (in the context's columns) of the tool results whose output gives way to a
    placeholder: all but the newest `keep_recent`, unless small or already pruned."""
    tool_results = [
        i
        for i, role in enumerate(context.roles)
        if role == TOOL_RESULT and context.tools[i] != 0
    ]
    older = tool_results[: max(len(tool_results) - keep_recent, 0)]
    return [
        i
        for i in older
        if not context.flags[i] & FLAG_PRUNED and context.tokens[i] >= min_tokens
    ]


def plan(context, replacements):
    """Runs of kept entries become `keep-range` items; each replaced entry one `insert`.
    `replacements` maps a position to its placeholder (JSON, tokens)."""
    entries = context.entries
    items = []
    tokens = 0
    run_start = None
    for i, entry in enumerate(entries):
        replacement = replacements.get(i)
        if replacement is None:
            if run_start is None:
                run_start = i
            tokens += context.tokens[i]
            continue
        if run_start is not None:
            items.append(keep_run(entries, run_start, i - 1))
            run_start = None
        json_text, placeholder_tokens = replacement
        items.append(types.ContextItem_Insert(json_text))
        tokens += placeholder_tokens
    if run_start is not None:
        items.append(keep_run(entries, run_start, len(entries) - 1))
    return items, tokens


def keep_run(entries, first, last):
    if first == last:
        return types.ContextItem_Keep(entries[first])
    return types.ContextItem_KeepRange(types.KeepRange(first=entries[first], last=entries[last]))


def replacements_for(context, positions):
    """The placeholders of the tool results at `positions`; their call ids come from the host
    (the context carries none). A result whose message names no call is kept as it is."""
    if not positions:
        return {}
    try:
        call_ids = host.tool_call_ids([context.entries[i] for i in positions])
    except Err as error:
        raise Err(f"tool-call-ids failed: {error.value}")
    replacements = {}
    for i, call_id in zip(positions, call_ids):
        if call_id is None:
            continue
        tool_name = context.tool_names[context.tools[i] - 1]
        is_error = bool(context.flags[i] & FLAG_IS_ERROR)
        replacements[i] = placeholder(call_id, tool_name, context.tokens[i], is_error)
    return replacements


class Engine(exports.Engine):
    def info(self) -> types.EngineInfo:
        return types.EngineInfo(
            id=ENGINE_ID, name="Tool output trimmer (Python)", version="0.1.0", owns_compaction=False
        )

    def bootstrap(self, request: types.BootstrapRequest) -> types.BootstrapResult:
        # Nothing to import: every decision is made from what `assemble` receives.
        return types.BootstrapResult(bootstrapped=True, imported_messages=None, reason=None)

    def ingest(self, session, message, is_heartbeat) -> types.IngestResult:
        global INGESTED
        INGESTED += 1
        return types.IngestResult(ingested=True)

    def ingest_batch(self, session, messages, is_heartbeat) -> int:
        global INGESTED
        INGESTED += len(messages)
        return len(messages)

    def assemble(self, request: types.AssembleRequest) -> types.AssembleResult:
        settings = config()
        context = request.context
        positions = trimmable(context, settings["keep_recent"], settings["min_tokens"])
        replacements = replacements_for(context, positions)
        items, tokens = plan(context, replacements)
        if replacements:
            saved = sum(context.tokens[i] for i in replacements)
            host.log(
                host.LogLevel.DEBUG,
                f"trimmed {len(replacements)} tool outputs ({saved} tokens); {INGESTED} messages ingested",
            )
        return types.AssembleResult(items=items, estimated_tokens=tokens, system_prompt_addition=None)

    def compact(self, request: types.CompactRequest) -> types.CompactResult:
        try:
            compaction = host.delegate_compaction(request)
        except Err as error:
            raise Err(f"delegate-compaction failed: {error.value}")
        if compaction is None:
            return types.CompactResult(ok=True, compacted=False, reason="nothing to compact", compaction=None)
        return types.CompactResult(ok=True, compacted=True, reason=None, compaction=compaction)

    def after_turn(self, request: types.AfterTurnRequest) -> None:
        return None

    def prepare_subagent_spawn(self, spawn: types.SubagentSpawn):
        return None

    def rollback_subagent_spawn(self, handle: int) -> None:
        raise Err(f"rollback handle {handle} was never issued")

    def on_subagent_ended(self, child_session_key: str, reason) -> None:
        return None

    def dispose(self, session: types.Session) -> None:
        return None
