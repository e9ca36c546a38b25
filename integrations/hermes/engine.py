"""The Hermes context engine `ctxhost`: the engine in ctxhost's slot (`plugins.slots.contextEngine`
in $CTXHOST_HOME/ctxhost.json) decides what Hermes' compaction returns, through one
`ctxhost serve` sidecar per Hermes process (docs/serve-protocol.md).

Hermes shows an engine its messages only in `compress`, `handle_tool_call(..., messages=)` and
`on_session_end`, so each of those brings ctxhost's mirror of the session (key
`hermes:<session id>`) in step with Hermes' list with `session.sync`:

- The mirror holds every message the session ever had, in order, as AgentMessages; Hermes'
  list after a compaction holds ctxhost's summary, then the messages ctxhost kept, then what came
  since. Hermes' list is lined up with the mirror at the mirror's last message (found by its
  fingerprint, scanning from the end): what follows it is new and is appended, what precedes it
  is the mirror's positions counted back until ctxhost's summary.
- `compress`: sync, `session.compact` (forced: Hermes' threshold said when, ctxhost's engine
  says what), `session.assemble`, and the plan becomes the list Hermes gets back (kept
  positions are Hermes' own message dicts; inserted summaries are new messages).
- `get_tool_schemas` / `handle_tool_call`: `session.tools` / `session.callTool` (ctx_search,
  ctx_expand and the engine's own tools).

Nothing here may break a Hermes turn: when the sidecar is missing or fails, the engine says so
on stderr and does what Hermes does without it (its built-in compressor compacts; tool calls
answer with an error the model can read).
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from agent.context_engine import ContextEngine

from . import messages as M
from .sidecar import DEFAULT_CALL_TIMEOUT_S, INVALID_PARAMS, UNKNOWN_SESSION, RpcError, Sidecar, SidecarError, sidecar_for

# ctxhost's compaction summary starts with these words (host/src: the summary it inserts). After
# `--resume` Hermes' list holds the summary as a plain message read from state.db, without the
# `_ctxhost` key; these words tell it apart from the user's own messages.
SUMMARY_LEAD = "The earlier part of this conversation was compacted."
# One sync request stays well under the server's line cap (16 MiB by default).
SYNC_CHUNK_BYTES = 4 * 1024 * 1024
# Key of a tool listing made before Hermes names its session; `:internal-session-effects:`
# makes it ephemeral on the server (no mirror is kept for it).
TOOL_LISTING_KEY = "hermes:internal-session-effects:tool-listing"


# The mirror as the server reports it: message count, last fingerprint, chain.
Mirror = Tuple[int, Optional[str], Optional[str]]


def _heard(state: Dict[str, Any]) -> Mirror:
    """The mirror's state in a `session.bootstrap` or `session.sync` answer."""
    return (int(state.get("messageCount") or 0), state.get("lastFingerprint"), state.get("chain"))


def _warn(message: str) -> None:
    sys.stderr.write(f"ctxhost: {message}\n")
    sys.stderr.flush()


def _describe(err: BaseException) -> str:
    return str(err) or type(err).__name__


def resolve_settings(env: Optional[Dict[str, str]] = None, config: Optional[Dict[str, Any]] = None) -> Tuple[str, str, float]:
    """(binary, home, call timeout s): `CTXHOST_BIN`, else `context.ctxhost.binary` in Hermes'
    config.yaml, else `ctxhost` on PATH; `CTXHOST_HOME`, else `context.ctxhost.home`, else
    ~/.ctxhost; `CTXHOST_CALL_TIMEOUT_MS`, else 30 s."""
    env = os.environ if env is None else env
    settings = ((config or {}).get("context") or {}).get("ctxhost") or {}
    if not isinstance(settings, dict):
        settings = {}

    def pick(name: str, key: str) -> Optional[str]:
        for value in (env.get(name), settings.get(key)):
            if isinstance(value, str) and value.strip():
                return value.strip()
        return None

    binary = os.path.expanduser(pick("CTXHOST_BIN", "binary") or "ctxhost")
    if "/" in binary and not os.path.isabs(binary):
        binary = os.path.abspath(binary)
    home = os.path.abspath(os.path.expanduser(pick("CTXHOST_HOME", "home") or "~/.ctxhost"))
    timeout = DEFAULT_CALL_TIMEOUT_S
    raw = env.get("CTXHOST_CALL_TIMEOUT_MS") or settings.get("callTimeoutMs")
    try:
        if raw is not None and float(raw) > 0:
            timeout = float(raw) / 1000.0
    except (TypeError, ValueError):
        _warn(f"CTXHOST_CALL_TIMEOUT_MS / context.ctxhost.callTimeoutMs is not a number of milliseconds ({raw!r}); using {timeout:.0f} s")
    return binary, home, timeout


def _hermes_config() -> Dict[str, Any]:
    try:
        from hermes_cli.config import load_config_readonly

        config = load_config_readonly()
        return config if isinstance(config, dict) else {}
    except Exception:  # noqa: BLE001 - without Hermes' config the environment decides
        return {}


def looks_inserted(message: M.Message) -> bool:
    """Whether ctxhost inserted this message: marked in this process, or ctxhost's summary read
    back from Hermes' state.db."""
    if M.is_inserted(message):
        return True
    return message.get("role") in ("user", "assistant") and M.text_of(message.get("content")).startswith(SUMMARY_LEAD)


class CtxhostEngine(ContextEngine):
    """Hermes' context engine backed by `ctxhost serve`. Holds only plain state, so Hermes'
    deep copy of it works; the sidecar lives in the module registry of sidecar.py."""

    def __init__(self, binary: Optional[str] = None, home: Optional[str] = None, call_timeout_s: Optional[float] = None):
        # Cheap on purpose: Hermes constructs engines just to list them.
        self._settings: Optional[Tuple[str, str, float]] = None
        if binary or home or call_timeout_s:
            resolved = resolve_settings(config={})
            self._settings = (binary or resolved[0], home or resolved[1], call_timeout_s or resolved[2])
        self.last_prompt_tokens = 0
        self.last_completion_tokens = 0
        self.last_total_tokens = 0
        self.threshold_tokens = 0
        self.context_length = 0
        self.compression_count = 0
        self.threshold_percent = 0.75
        self.protect_first_n = 3
        self.protect_last_n = 6
        self._model: Dict[str, Any] = {}
        self._session_id: Optional[str] = None
        # The mirror as last heard from the server: (message count, last fingerprint, chain);
        # None until the session is opened on the current sidecar (generation).
        self._mirror: Optional[Mirror] = None
        self._generation = -1
        # Length of Hermes' list at the last sync in this process: its last message is the
        # mirror's, unless Hermes replaced the list since (a compaction).
        self._last_len: Optional[int] = None
        self._tools: Optional[List[Dict[str, Any]]] = None
        self._warned: set = set()
        self._fallback = None  # Hermes' ContextCompressor, made when ctxhost cannot compact
        self._bridge_seconds = 0.0

    @property
    def name(self) -> str:
        return "ctxhost"

    def __deepcopy__(self, memo: Dict[int, Any]) -> "CtxhostEngine":
        # Hermes deep-copies a plugin's engine for each agent. The copy gets the plain state; the
        # sidecar is shared through the registry, and Hermes' fallback compressor (it may hold
        # clients) is made again by the copy when needed.
        clone = type(self).__new__(type(self))
        for key, value in self.__dict__.items():
            clone.__dict__[key] = None if key == "_fallback" else copy.deepcopy(value, memo)
        return clone

    # --- settings, sidecar, session -------------------------------------------------------

    @property
    def settings(self) -> Tuple[str, str, float]:
        if self._settings is None:
            self._settings = resolve_settings(config=_hermes_config())
        return self._settings

    @property
    def sidecar(self) -> Sidecar:
        binary, home, timeout = self.settings
        return sidecar_for(binary, home, timeout)

    @property
    def session_key(self) -> Optional[str]:
        return f"hermes:{self._session_id}" if self._session_id else None

    def _say_once(self, message: str) -> None:
        """A warning said once per engine (Hermes asks again every API call)."""
        if message not in self._warned:
            self._warned.add(message)
            _warn(message)

    def _open(self) -> None:
        key = self.session_key
        if key is None:
            raise RuntimeError("Hermes has not named the session yet (no on_session_start)")
        r = self.sidecar.call("session.bootstrap", {"sessionKey": key, "sessionId": self._session_id})
        self._mirror = _heard(r)
        self._generation = self.sidecar.generation

    def _call(self, method: str, params: Dict[str, Any]) -> Any:
        """A session method; a server that forgot the session (it restarted) or died mid-call
        gets the session opened again and the call once more."""
        if self._mirror is None or self._generation != self.sidecar.generation:
            self._open()
        try:
            return self.sidecar.call(method, params)
        except (RpcError, SidecarError) as err:
            again = (isinstance(err, RpcError) and err.code == UNKNOWN_SESSION) or (
                isinstance(err, SidecarError) and err.kind == "exited"
            )
            if not again:
                raise
            self._open()
            return self.sidecar.call(method, params)

    def _window(self) -> int:
        """The window compaction aims at: Hermes' model window, narrowed by ctxhost's own
        (`agents.defaults.contextWindow`)."""
        window = self.context_length or 0
        try:
            ctxhost_window = int(self.sidecar.start().get("contextWindow") or 0)
        except (RpcError, SidecarError) as err:
            self._say_once(f"ctxhost serve is unavailable ({_describe(err)}); Hermes' own threshold applies")
            ctxhost_window = 0
        if ctxhost_window > 0:
            window = min(window, ctxhost_window) if window > 0 else ctxhost_window
        return window

    # --- lining Hermes' list up with the mirror ----------------------------------------------

    def _follow(self, messages: List[M.Message]) -> List[Optional[int]]:
        """Brings the mirror in step with Hermes' list and returns each message's mirror position
        (None for what ctxhost inserted, or for messages before it whose position is unknown)."""
        if self._mirror is None or self._generation != self.sidecar.generation:
            self._open()
        try:
            return self._follow_once(messages)
        except RpcError as err:
            if err.code != INVALID_PARAMS:
                raise
            # The mirror is not where it was last heard to be (another Hermes process on this
            # session wrote to it): learn where it is and line up once more.
            _warn(f"the mirror of {self.session_key} moved ({err.detail}); syncing again")
            self._open()
            self._last_len = None
            return self._follow_once(messages)

    def _follow_once(self, messages: List[M.Message]) -> List[Optional[int]]:
        count, last, _ = self._mirror  # type: ignore[misc]
        fps = [M.fingerprint(m) for m in messages]
        inserted = [looks_inserted(m) for m in messages]
        positions: List[Optional[int]] = [None] * len(messages)
        anchor = -1
        known = self._last_len
        if count > 0 and known is not None and 0 < known <= len(messages) and fps[known - 1] == last and not inserted[known - 1]:
            # Where the last sync left Hermes' list: a later message equal to it ("ok" twice) is new.
            anchor = known - 1
        elif count > 0:
            for i in range(len(messages) - 1, -1, -1):
                if not inserted[i] and fps[i] == last:
                    anchor = i
                    break
        reset = count > 0 and anchor < 0
        if reset:
            # Hermes' list does not hold the mirror's last message (a rewind, a compaction by
            # Hermes' own compressor while ctxhost was away): the mirror starts again from the
            # list; the server keeps the old file beside it.
            self._say_once(
                f"the mirror of {self.session_key} ({count} messages) is not part of Hermes' history "
                f"({len(messages)} messages); starting it again from Hermes' history"
            )
            count = 0
        else:
            position = count - 1
            for i in range(anchor, -1, -1):
                if inserted[i]:
                    break
                positions[i] = position
                position -= 1
        tail_index = [i for i in range(anchor + 1, len(messages)) if not inserted[i]]
        for n, i in enumerate(tail_index):
            positions[i] = count + n
        if tail_index or reset:
            names: Dict[str, str] = {}
            for m in messages[: anchor + 1]:
                for call in m.get("tool_calls") or []:
                    if isinstance(call, dict):
                        names[str(call.get("id", ""))] = str((call.get("function") or {}).get("name", ""))
            tail = M.to_agent_all([messages[i] for i in tail_index], names)
            self._mirror = self._sync(tail, [fps[i] for i in tail_index], reset)
        self._last_len = len(messages)
        return positions

    def _sync(self, agent_messages: List[M.Message], fps: List[str], reset: bool) -> Mirror:
        """`session.sync` of the tail in requests of at most SYNC_CHUNK_BYTES, each with its
        messages' fingerprints (the server chains them) and, for a tail, the mirror it extends
        as last heard (`base`: refused, with nothing written, when the mirror moved); answers
        the mirror as the last request left it."""
        heard: Mirror = (0, None, None) if reset else self._mirror  # type: ignore[assignment]
        key = self.session_key
        limit = SYNC_CHUNK_BYTES
        maxline = (self.sidecar.initialized or {}).get("limits", {}).get("maxLineBytes")
        if isinstance(maxline, int) and maxline > 0:
            limit = min(limit, maxline // 2)
        i = 0
        first = True
        while i < len(agent_messages) or (first and reset):
            j, size = i, 0
            while j < len(agent_messages):
                n = len(json.dumps(agent_messages[j], ensure_ascii=False).encode("utf-8"))
                if j > i and size + n > limit:
                    break
                size += n
                j += 1
            params: Dict[str, Any] = {"sessionKey": key, "from": heard[0], "messages": agent_messages[i:j]}
            if j > i:
                params["fingerprints"] = fps[i:j]
                params["lastFingerprint"] = fps[j - 1]
            if first and reset:
                params["reset"] = True
            else:
                base = {"messageCount": heard[0], "lastFingerprint": heard[1], "chain": heard[2]}
                params["base"] = {k: v for k, v in base.items() if v is not None}
            heard = _heard(self._call("session.sync", params))
            first = False
            i = j
        return heard

    # --- ContextEngine: tokens and thresholds --------------------------------------------------

    def update_from_response(self, usage: Dict[str, Any]) -> None:
        usage = usage or {}
        self.last_prompt_tokens = int(usage.get("prompt_tokens") or 0)
        self.last_completion_tokens = int(usage.get("completion_tokens") or 0)
        self.last_total_tokens = int(usage.get("total_tokens") or self.last_prompt_tokens + self.last_completion_tokens)

    def should_compress(self, prompt_tokens: Optional[int] = None) -> bool:
        tokens = self.last_prompt_tokens if prompt_tokens is None else prompt_tokens
        return bool(self.threshold_tokens) and tokens is not None and tokens >= self.threshold_tokens

    def update_model(self, model: str, context_length: int, base_url: str = "", api_key: str = "",
                     provider: str = "", api_mode: str = "") -> None:
        started = time.monotonic()
        self._model = {"model": model, "base_url": base_url, "api_key": api_key, "provider": provider, "api_mode": api_mode}
        self.context_length = context_length
        # Hermes' threshold of its request (system prompt and tools included), over the smaller of
        # the model's window and ctxhost's: a small ctxhost window compacts earlier.
        self.threshold_tokens = int(self._window() * self.threshold_percent)
        self._fallback = None
        self._bridge_seconds += time.monotonic() - started

    # --- ContextEngine: sessions ---------------------------------------------------------------

    def bind_session_state(self, session_db: Any = None, session_id: Optional[str] = None, **_: Any) -> None:
        # Hermes names the session here, before it asks for the tool schemas.
        if session_id:
            self._set_session(session_id)

    def on_session_start(self, session_id: str, **kwargs: Any) -> None:
        if kwargs.get("boundary_reason") == "compression" and self._session_id:
            # Hermes' compaction boundary: the conversation goes on (under a new id when Hermes
            # rotates sessions), so it stays in the mirror that holds what was compacted.
            return
        if session_id:
            self._set_session(session_id)

    def _set_session(self, session_id: str) -> None:
        if session_id != self._session_id:
            self._session_id = session_id
            self._mirror = None
            self._last_len = None
            self._tools = None

    def on_session_end(self, session_id: str, messages: List[M.Message]) -> None:
        # The process' last messages reach the mirror, so they are searchable and the next
        # process (`--resume`) lines up with them. Best effort.
        if not session_id or not messages:
            return
        if self._session_id is None:
            self._set_session(session_id)
        started = time.monotonic()
        try:
            self._follow(list(messages))
        except Exception as err:  # noqa: BLE001 - never break Hermes' exit
            self._say_once(f"the last messages of {self.session_key} did not reach ctxhost's mirror ({_describe(err)}); the next turn sends them")
        finally:
            self._bridge_seconds += time.monotonic() - started
            self._report_timing()

    def on_session_reset(self) -> None:
        super().on_session_reset()
        self._mirror = None
        self._last_len = None

    # --- ContextEngine: compaction ---------------------------------------------------------

    def compress(self, messages: List[M.Message], current_tokens: Optional[int] = None,
                 focus_topic: Optional[str] = None, force: bool = False) -> List[M.Message]:
        started = time.monotonic()
        # Hermes reads these after compress (its built-in compressor's verdict); a fallback
        # earlier in this process must not leave its verdict on a later compaction by ctxhost.
        self._last_compress_aborted = False
        self._last_summary_error = None
        self._last_compression_made_progress = False
        try:
            return self._compress(messages, focus_topic, current_tokens)
        except Exception as err:  # noqa: BLE001 - any failure: Hermes' own compaction, said aloud
            _warn(
                f"compacting {self.session_key or 'the session'} through ctxhost failed ({_describe(err)}); "
                "Hermes compacts with its built-in compressor this time"
            )
            return self._hermes_compress(messages, current_tokens, focus_topic, force)
        finally:
            self._bridge_seconds += time.monotonic() - started

    def _compress(self, messages: List[M.Message], focus_topic: Optional[str], current_tokens: Optional[int] = None) -> List[M.Message]:
        positions = self._follow(messages)
        params: Dict[str, Any] = {"sessionKey": self.session_key, "force": True}
        window = self._window()
        budget = message_budget(window, current_tokens, messages)
        if budget > 0:
            params["tokenBudget"] = budget
        if focus_topic:
            params["customInstructions"] = f"Focus on: {focus_topic}"
        compacted = self._call("session.compact", params)
        if not compacted.get("compacted"):
            # Nothing to compact: the same list, which Hermes takes as "no progress".
            self._say_once(f"ctxhost compacted nothing of {self.session_key} ({compacted.get('reason') or 'nothing to compact'}); Hermes keeps its messages")
            return messages
        count, last, chain = self._mirror  # type: ignore[misc]
        plan = self._call(
            "session.assemble",
            {k: v for k, v in {"sessionKey": self.session_key, "messageCount": count, "lastFingerprint": last, "chain": chain,
                               "tokenBudget": budget or None, "model": self._model.get("model") or None}.items() if v is not None},
        )
        if plan.get("status") != "ok":
            raise RuntimeError(
                f"the mirror of {self.session_key} is out of step after a sync (mirror {plan.get('messageCount')}, Hermes {count})"
            )
        by_position = {p: messages[i] for i, p in enumerate(positions) if p is not None}
        result = plan_to_messages(plan.get("items") or [], by_position)
        check_tool_pairs(result)
        # Hermes' list becomes `result`: the next sync finds the mirror's last message by its
        # fingerprint again.
        self._last_len = None
        self.compression_count += 1
        self._last_compression_made_progress = True
        _warn(
            f"ctxhost compacted {self.session_key} with {(self.sidecar.initialized or {}).get('engine', {}).get('id', 'its engine')}: "
            f"{compacted.get('tokensBefore')} -> {compacted.get('tokensAfter')} tokens, {len(messages)} -> {len(result)} messages"
        )
        return result

    def _hermes_compress(self, messages: List[M.Message], current_tokens: Optional[int],
                         focus_topic: Optional[str], force: bool) -> List[M.Message]:
        """What Hermes does without ctxhost: its built-in compressor, for this model."""
        if self._fallback is None:
            from agent.context_compressor import ContextCompressor

            self._fallback = ContextCompressor(
                model=self._model.get("model") or "",
                threshold_percent=self.threshold_percent,
                protect_first_n=self.protect_first_n,
                protect_last_n=self.protect_last_n,
                quiet_mode=True,
                base_url=self._model.get("base_url") or "",
                api_key=self._model.get("api_key") or "",
                config_context_length=self.context_length or None,
                provider=self._model.get("provider") or "",
                api_mode=self._model.get("api_mode") or "",
            )
        result = self._fallback.compress(messages, current_tokens=current_tokens, focus_topic=focus_topic, force=force)
        self.compression_count = max(self.compression_count, getattr(self._fallback, "compression_count", 0))
        for attr in ("_last_compress_aborted", "_last_summary_error", "_last_compression_made_progress"):
            if hasattr(self._fallback, attr):
                setattr(self, attr, getattr(self._fallback, attr))
        return result

    # --- ContextEngine: tools ----------------------------------------------------------------

    def get_tool_schemas(self) -> List[Dict[str, Any]]:
        if self._tools is not None:
            return [dict(t) for t in self._tools]
        started = time.monotonic()
        try:
            return self._list_tools()
        finally:
            self._bridge_seconds += time.monotonic() - started

    def _list_tools(self) -> List[Dict[str, Any]]:
        key = self.session_key or TOOL_LISTING_KEY
        try:
            if self.session_key:
                r = self._call("session.tools", {"sessionKey": key})
            else:
                self.sidecar.call("session.bootstrap", {"sessionKey": key})
                r = self.sidecar.call("session.tools", {"sessionKey": key})
        except Exception as err:  # noqa: BLE001 - no tools is Hermes without ctxhost
            self._say_once(
                f"ctxhost serve is unavailable ({_describe(err)}); ctx_search and ctx_expand are not offered, "
                "and Hermes compacts with its built-in compressor"
            )
            return []
        tools = []
        for tool in r.get("tools") or []:
            if isinstance(tool, dict) and tool.get("name"):
                tools.append({"name": tool["name"], "description": tool.get("description", ""),
                              "parameters": tool.get("parameters") or {"type": "object", "properties": {}}})
        self._tools = tools
        return [dict(t) for t in tools]

    def handle_tool_call(self, name: str, args: Dict[str, Any], **kwargs: Any) -> str:
        started = time.monotonic()
        try:
            messages = kwargs.get("messages")
            if self.session_key is None:
                return json.dumps({"error": f"{name} cannot run: Hermes has not named this session, so there is no history to read."})
            if isinstance(messages, list) and messages:
                try:
                    # The latest messages become searchable before the tool runs.
                    self._follow(messages)
                except Exception as err:  # noqa: BLE001 - the tool still reads what the mirror has
                    self._say_once(f"syncing {self.session_key} before {name} failed ({_describe(err)})")
            arguments = args if isinstance(args, dict) else {}
            r = self._call("session.callTool", {"sessionKey": self.session_key, "name": name, "arguments": arguments})
            content = r.get("content")
            text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
            if r.get("isError"):
                return json.dumps({"error": text}, ensure_ascii=False)
            # ctxhost's text as it is: its lines (one hit each) are written for the model to read.
            return text
        except RpcError as err:
            if err.code == INVALID_PARAMS:
                # The server names the tool and the field: the model can correct its call.
                return json.dumps({"error": f"{name}: {err.detail}"}, ensure_ascii=False)
            return json.dumps({"error": f"{name} could not run: {_describe(err)}"}, ensure_ascii=False)
        except Exception as err:  # noqa: BLE001 - the model gets a readable error, Hermes goes on
            return json.dumps(
                {"error": f"{name} could not run: ctxhost is unavailable ({_describe(err)}). Earlier messages cannot be searched right now; go on with what the context holds."},
                ensure_ascii=False,
            )
        finally:
            self._bridge_seconds += time.monotonic() - started

    def get_status(self) -> Dict[str, Any]:
        status = super().get_status()
        status["engine"] = "ctxhost"
        status["session_key"] = self.session_key
        status["sidecar_running"] = self.sidecar.running
        return status

    def _report_timing(self) -> None:
        # CTXHOST_BRIDGE_TIMING=1: one summary line on stderr per Hermes process, as the other
        # bridges print, for the e2e run's numbers.
        if os.environ.get("CTXHOST_BRIDGE_TIMING") != "1":
            return
        s = self.sidecar
        sys.stderr.write(
            f"[ctxhost-bridge] summary hookMs={self._bridge_seconds * 1000:.1f} calls={s.calls} "
            f"callMs={s.call_seconds * 1000:.1f} spawnMs={(s.spawn_seconds or 0) * 1000:.1f}\n"
        )


def message_budget(window: int, request_tokens: Optional[int], messages: List[M.Message]) -> int:
    """The window ctxhost compacts the messages for: the window less what Hermes sends besides
    them (system prompt, tool schemas), which is Hermes' estimate of the request less its
    estimate of the messages. Compacting for the whole window would leave Hermes' request past
    its threshold again, and Hermes would ask for another compaction in the same turn."""
    if window <= 0 or not request_tokens:
        return window
    try:
        from agent.model_metadata import estimate_messages_tokens_rough

        own = estimate_messages_tokens_rough(messages)
    except Exception:  # noqa: BLE001 - Hermes' estimator moved: its rule of thumb, 4 characters a token
        own = sum(len(json.dumps(m, ensure_ascii=False, default=str)) for m in messages) // 4
    overhead = max(0, int(request_tokens) - own)
    # Never less than half the window: an odd estimate must not starve the compaction.
    return max(window // 2, window - overhead)


def plan_to_messages(items: List[Dict[str, Any]], by_position: Dict[int, M.Message]) -> List[M.Message]:
    """The list an assemble plan stands for, in Hermes' terms: kept positions are Hermes' own
    message dicts, inserted messages are converted from AgentMessages."""
    out: List[M.Message] = []

    def own(position: Any, i: int) -> M.Message:
        if not isinstance(position, int) or position not in by_position:
            raise ValueError(f"items[{i}] keeps message {position}, which Hermes' list no longer holds")
        return by_position[position]

    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError(f"items[{i}] is not an object")
        if isinstance(item.get("index"), int):
            out.append(own(item["index"], i))
        elif isinstance(item.get("from"), int) and isinstance(item.get("to"), int):
            if item["to"] < item["from"]:
                raise ValueError(f"items[{i}] is a run from {item['from']} back to {item['to']}")
            out.extend(own(p, i) for p in range(item["from"], item["to"] + 1))
        elif isinstance(item.get("message"), dict):
            if isinstance(item.get("replaces"), int):
                # Position `replaces` as the engine shows it (a pruned tool result): it stays that
                # position, so it keeps the call id it answers and is not marked inserted.
                original = own(item["replaces"], i)
                shown = M.from_agent(item["message"])
                shown.pop(M.INSERTED_KEY, None)
                if original.get("tool_call_id"):
                    shown["tool_call_id"] = original["tool_call_id"]
                shown["role"] = original.get("role", shown["role"])
                out.append(shown)
            else:
                out.append(M.from_agent(item["message"], kind="inserted"))
        else:
            raise ValueError(f"items[{i}] is none of {{index}}, {{from, to}} or {{message}}")
    return M.settle_roles(out)


def check_tool_pairs(messages: List[M.Message]) -> None:
    """Every tool result follows the assistant message that called it: a provider refuses a
    result whose call is gone, so such a plan is not handed to Hermes."""
    called = set()
    for i, m in enumerate(messages):
        for call in m.get("tool_calls") or []:
            if isinstance(call, dict):
                called.add(str(call.get("id", "")))
        if m.get("role") == "tool" and str(m.get("tool_call_id", "")) not in called:
            raise ValueError(f"message {i} of the compacted list answers tool call {m.get('tool_call_id')!r}, which the list no longer holds")
