"""Hermes' OpenAI-format messages and ctxhost's AgentMessages (pi's format, which the mirror
transcript and the engines read: roles `user`, `assistant`, `toolResult`; content blocks `text`,
`thinking`, `toolCall`), both ways, and the fingerprints that say whether two messages are one.

Hermes adds keys of its own to the messages it holds (`_db_persisted`, `timestamp`, ...) and
stores them in SQLite, so a message read back from `state.db` on `--resume` is not the same
dict as the live one. A fingerprint therefore covers only what the model sees: role, text,
tool calls and the tool result's call id.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, Iterable, List, Optional

Message = Dict[str, Any]

# The key a message ctxhost inserted carries in Hermes' list. Hermes drops keys that start with
# "_" before a request leaves for the provider, so the model never sees it.
INSERTED_KEY = "_ctxhost"


def text_of(content: Any) -> str:
    """The text of an OpenAI or AgentMessage content: a string, or the text of its parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                kind = part.get("type")
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif kind in ("image_url", "image", "input_image"):
                    parts.append("[image]")
        return "\n".join(parts)
    return str(content)


def _tool_calls(message: Message) -> List[Dict[str, str]]:
    calls = []
    for call in message.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        function = call.get("function") or {}
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, sort_keys=True, ensure_ascii=False)
        calls.append({"id": str(call.get("id", "")), "name": str(function.get("name", "")), "arguments": arguments})
    return calls


def core(message: Message) -> Dict[str, Any]:
    """What the model sees of a Hermes message: role, text, tool calls, tool call id."""
    out: Dict[str, Any] = {"role": message.get("role"), "text": text_of(message.get("content"))}
    calls = _tool_calls(message)
    if calls:
        out["tool_calls"] = calls
    if message.get("tool_call_id"):
        out["tool_call_id"] = str(message["tool_call_id"])
    return out


def fingerprint(message: Message) -> str:
    """16 hex digits of SHA-256 over the message's core, as canonical JSON."""
    data = json.dumps(core(message), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode("utf-8")).hexdigest()[:16]


def is_inserted(message: Message) -> bool:
    """Whether ctxhost inserted this message (a compaction summary) in this process."""
    marker = message.get(INSERTED_KEY)
    return isinstance(marker, dict) and marker.get("inserted") is True


def _timestamp_ms(message: Message) -> Optional[int]:
    ts = message.get("timestamp")
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts <= 0:
        return None
    # Hermes stamps time.time() (seconds); AgentMessages carry Unix milliseconds.
    return int(ts * 1000) if ts < 1e11 else int(ts)


def to_agent(message: Message, tool_names: Optional[Dict[str, str]] = None) -> Message:
    """One Hermes message as an AgentMessage for the mirror. A role pi does not know (a system
    message) is kept as it is: ctxhost keeps such a message in the file and out of the context,
    so positions still line up."""
    role = message.get("role")
    ts = _timestamp_ms(message)
    out: Message
    if role == "user":
        out = {"role": "user", "content": [{"type": "text", "text": text_of(message.get("content"))}]}
    elif role == "assistant":
        blocks: List[Dict[str, Any]] = []
        reasoning = message.get("reasoning") or message.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            blocks.append({"type": "thinking", "thinking": reasoning})
        text = text_of(message.get("content"))
        if text:
            blocks.append({"type": "text", "text": text})
        calls = _tool_calls(message)
        for call in calls:
            try:
                arguments = json.loads(call["arguments"]) if call["arguments"] else {}
            except ValueError:
                arguments = None
            if not isinstance(arguments, dict):
                # The model's arguments were not a JSON object: kept as text, so nothing is lost.
                arguments = {"raw": call["arguments"]}
            blocks.append({"type": "toolCall", "id": call["id"], "name": call["name"], "arguments": arguments})
        out = {"role": "assistant", "content": blocks, "stopReason": "toolUse" if calls else "stop"}
    elif role == "tool":
        call_id = str(message.get("tool_call_id") or "")
        name = message.get("name") or message.get("tool_name") or (tool_names or {}).get(call_id) or ""
        out = {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": str(name),
            "content": [{"type": "text", "text": text_of(message.get("content"))}],
            "isError": False,
        }
    else:
        out = {k: v for k, v in message.items() if not str(k).startswith("_")}
        return out
    if ts is not None:
        out["timestamp"] = ts
    return out


def to_agent_all(messages: Iterable[Message], start_names: Optional[Dict[str, str]] = None) -> List[Message]:
    """Converts a run of Hermes messages; a tool result learns its tool's name from the call."""
    names: Dict[str, str] = dict(start_names or {})
    out = []
    for message in messages:
        for call in _tool_calls(message):
            names[call["id"]] = call["name"]
        out.append(to_agent(message, names))
    return out


def from_agent(message: Message, kind: Optional[str] = None) -> Message:
    """An AgentMessage ctxhost inserted or rewrote, as a Hermes (OpenAI-format) message."""
    role = message.get("role")
    marker = message.get("__ctxhost") if isinstance(message.get("__ctxhost"), dict) else None
    out: Message
    if role == "assistant":
        content = message.get("content")
        text_parts = []
        calls = []
        if isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    text_parts.append(block["text"])
                elif block.get("type") == "toolCall":
                    calls.append(
                        {
                            "id": str(block.get("id", "")),
                            "type": "function",
                            "function": {
                                "name": str(block.get("name", "")),
                                "arguments": json.dumps(block.get("arguments") or {}, ensure_ascii=False),
                            },
                        }
                    )
        else:
            text_parts.append(text_of(content))
        out = {"role": "assistant", "content": "\n".join(text_parts)}
        if calls:
            out["tool_calls"] = calls
    elif role == "toolResult":
        out = {"role": "tool", "tool_call_id": str(message.get("toolCallId", "")), "content": text_of(message.get("content"))}
    elif role in ("compactionSummary", "branchSummary"):
        out = {"role": "user", "content": str(message.get("summary", ""))}
    else:
        out = {"role": "user", "content": text_of(message.get("content"))}
    if marker is not None or kind is not None:
        out[INSERTED_KEY] = {"inserted": True, "kind": (marker or {}).get("kind", kind)}
    return out


def settle_roles(messages: List[Message]) -> List[Message]:
    """Gives each inserted `user` message that would sit next to another user message the
    assistant role instead: Hermes merges consecutive user messages (and providers refuse
    them), and a merged message would no longer be the one the mirror holds."""
    for i, message in enumerate(messages):
        if not is_inserted(message) or message.get("role") != "user":
            continue
        before = messages[i - 1].get("role") if i > 0 else None
        after = messages[i + 1].get("role") if i + 1 < len(messages) else None
        if "user" in (before, after) and "assistant" not in (before, after):
            message["role"] = "assistant"
    return messages
