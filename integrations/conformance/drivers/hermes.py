#!/usr/bin/env python3
"""Replays the fixture through the Hermes plugin (integrations/hermes) the way Hermes 0.19 calls
its context engine (shared/HERMES.md), and writes what the model would get at each call and what
ctx_search answers at the end.

    python hermes.py --fixture conversation.json --home DIR --binary ctxhost --out record.json

Runs in a Python where hermes-agent is installed (the plugin's engine subclasses Hermes'
ContextEngine). The plugin is loaded as Hermes loads a user plugin (its folder as a package),
registered through register(ctx), and deep-copied as Hermes does; then bind_session_state,
update_model, on_session_start and get_tool_schemas, as at the start of a session.

- Hermes has no per-call hook: the model gets Hermes' own list, which the engine changes only
  when Hermes compresses. Its automatic compression is off here as in the other agents (the
  fixture says when a person compacts); Hermes' estimate of the request still goes to compress.
- A manual compaction (`/compress`) is compress(messages, current_tokens=<Hermes' request
  estimate>, force=True); Hermes then ends and restarts the session at the boundary.
- Messages are Hermes' OpenAI-format dicts with its own keys (`timestamp` in seconds).
"""

import argparse
import copy
import importlib.util
import json
import os
import sys
from pathlib import Path

PLUGIN_DIR = Path(__file__).resolve().parents[2] / "hermes"
SESSION_ID = "20261120_090000_c0ffee"
# The model's window every agent is given (Hermes refuses less than 64k); ctxhost's smaller
# `agents.defaults.contextWindow` is the one that decides (drivers/args.mjs says the same).
MODEL_WINDOW = 128_000


def load_plugin():
    """The plugin folder as a package of its own name, as Hermes imports a user plugin."""
    name = "ctxhost_hermes_plugin"
    spec = importlib.util.spec_from_file_location(name, PLUGIN_DIR / "__init__.py", submodule_search_locations=[str(PLUGIN_DIR)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def native(message):
    """A fixture message as Hermes holds it."""
    from datetime import datetime

    ts = datetime.fromisoformat(message["at"].replace("Z", "+00:00")).timestamp()
    role = message["role"]
    if role == "user":
        return {"role": "user", "content": message["text"], "timestamp": ts}
    if role == "assistant":
        out = {"role": "assistant", "content": message["text"], "timestamp": ts, "finish_reason": "stop"}
        calls = message.get("toolCalls") or []
        if calls:
            out["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
                for c in calls
            ]
            out["finish_reason"] = "tool_calls"
        return out
    return {"role": "tool", "tool_call_id": message["toolCallId"], "name": message["toolName"], "content": message["text"], "timestamp": ts}


def item(message, M):
    """A Hermes message as the comparer's Item (neutral/agentItem in JavaScript): Hermes' `tool`
    role is the fixture's `toolResult`."""
    role = message.get("role")
    out = {"role": "toolResult" if role == "tool" else role, "text": M.text_of(message.get("content"))}
    if message.get("tool_call_id"):
        out["toolCallId"] = str(message["tool_call_id"])
    calls = [str(c.get("id", "")) for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    if calls:
        out["toolCalls"] = calls
    if M.is_inserted(message):
        out["inserted"] = message[M.INSERTED_KEY].get("kind") or "inserted"
    return out


def request_estimate(messages):
    """Hermes' estimate of the request (no system prompt or tools in this replay)."""
    from agent.model_metadata import estimate_request_tokens_rough

    return estimate_request_tokens_rough(messages)


def main():
    parser = argparse.ArgumentParser()
    for name in ("fixture", "home", "binary", "out"):
        parser.add_argument(f"--{name}", required=True)
    args = parser.parse_args()
    fixture = json.loads(Path(args.fixture).read_text())
    os.environ["CTXHOST_BIN"] = args.binary
    os.environ["CTXHOST_HOME"] = args.home

    plugin = load_plugin()
    M = plugin.messages
    registered = []

    class Ctx:
        def register_context_engine(self, engine):
            registered.append(engine)

    plugin.register(Ctx())
    engine = copy.deepcopy(registered[0])
    engine.bind_session_state(session_db=None, session_id=SESSION_ID)
    engine.update_model("fake-model", MODEL_WINDOW, base_url="http://127.0.0.1:9/v1", api_key="sk-fake", provider="custom")
    engine.on_session_start(SESSION_ID)
    if not any(t["name"] == "ctx_search" for t in engine.get_tool_schemas()):
        raise SystemExit("the engine offers no ctx_search: is the sidecar up?")

    messages = []
    record = []
    for t, turn in enumerate(fixture["turns"]):
        if turn.get("compactBefore"):
            compressed = engine.compress(messages, current_tokens=request_estimate(messages), force=True)
            if compressed != messages:
                engine.on_session_end(SESSION_ID, compressed)
                engine.on_session_start(SESSION_ID, boundary_reason="compression", old_session_id=SESSION_ID)
            messages = compressed
        calls = 0
        for i, message in enumerate(turn["messages"]):
            if message["role"] == "assistant":
                # The model call that produces this reply: Hermes sends its list as it is.
                record.append({"turn": t, "call": calls, "messages": [item(m, M) for m in messages]})
                calls += 1
            messages.append(native(message))
    engine.on_session_end(SESSION_ID, messages)

    recall = []
    for query in fixture["queries"]:
        recall.append({"query": query, "text": engine.handle_tool_call("ctx_search", {"query": query}, messages=messages)})
    plugin.sidecar.shutdown_all()
    Path(args.out).write_text(json.dumps({"agent": "hermes", "home": args.home, "calls": record, "recall": recall}, indent=2) + "\n")


if __name__ == "__main__":
    main()
