"""The engine against `ctxhost serve`: tools, compaction through ctxhost, deep copy with a live
sidecar, the mirror across a simulated --resume, and Hermes' own behaviour when ctxhost fails."""

import copy
import json
import sys
from pathlib import Path

import pytest

from conftest import conversation, plugin

CtxhostEngine = plugin.engine.CtxhostEngine
M = plugin.messages
FAKE = str(Path(__file__).with_name("fake_sidecar.py"))


def started(binary, home, session="20261128_070000_abc123", window=131072):
    engine = CtxhostEngine(binary=binary, home=home)
    engine.bind_session_state(session_db=None, session_id=session)
    engine.update_model("fake-model", window)
    engine.on_session_start(session)
    return engine


def test_tool_schemas_are_ctxhost_session_tools(ctxhost_bin, ctxhost_home):
    engine = started(ctxhost_bin, ctxhost_home)
    schemas = engine.get_tool_schemas()
    names = [s["name"] for s in schemas]
    assert names[:2] == ["ctx_search", "ctx_expand"]
    for schema in schemas:
        assert schema["description"] and schema["parameters"]["type"] == "object"
        assert set(schema) == {"name", "description", "parameters"}
    assert "query" in schemas[0]["parameters"]["required"]


def test_the_threshold_follows_the_smaller_window(ctxhost_bin, ctxhost_home):
    engine = started(ctxhost_bin, ctxhost_home)
    # ctxhost's window (3000) is smaller than the model's (131072): Hermes compacts at 75% of it.
    assert engine.context_length == 131072
    assert engine.threshold_tokens == 2250
    assert engine.should_compress(2250) and not engine.should_compress(2249)


def test_deep_copy_shares_the_live_sidecar_outside_the_engine(ctxhost_bin, ctxhost_home):
    engine = started(ctxhost_bin, ctxhost_home)
    engine.get_tool_schemas()
    sidecar = engine.sidecar
    assert sidecar.running
    pid = sidecar.pid
    clone = copy.deepcopy(engine)
    assert clone is not engine
    assert not any(isinstance(v, plugin.sidecar.Sidecar) for v in vars(clone).values())
    assert clone.sidecar is sidecar and sidecar.pid == pid
    clone.threshold_tokens = 1
    assert engine.threshold_tokens == 2250
    answer = clone.handle_tool_call("ctx_search", {"query": "anything"}, messages=conversation(1))
    assert "match" in answer or "no entr" in answer.lower(), answer
    assert sidecar.pid == pid


def test_compress_returns_ctxhost_summary_and_kept_messages(ctxhost_bin, ctxhost_home, capsys):
    engine = started(ctxhost_bin, ctxhost_home)
    history = conversation(8) + [{"role": "user", "content": "the question of turn 8", "timestamp": 1790000099.0}]
    result = engine.compress(history, current_tokens=5000)
    assert len(result) < len(history)
    assert M.is_inserted(result[0])
    assert M.text_of(result[0]["content"]).startswith(plugin.engine.SUMMARY_LEAD)
    # The kept messages are Hermes' own dicts, the last ones of its history.
    kept = result[1:]
    assert all(any(k is h for h in history) for k in kept)
    assert kept[-1] is history[-1]
    assert result[0]["role"] != result[1]["role"] or result[1]["role"] != "user"
    assert engine.compression_count == 1
    assert "ctxhost compacted hermes:20261128_070000_abc123" in capsys.readouterr().err
    # The compacted prompt can be found and opened again.
    hits = engine.handle_tool_call("ctx_search", {"query": "END-OF-PROMPT-1", "role": "user"})
    line = next(l for l in hits.splitlines() if "compacted" in l)
    opened = engine.handle_tool_call("ctx_expand", {"id": line.split()[1]})
    assert "END-OF-PROMPT-1" in opened


def test_a_resumed_session_lines_up_with_the_mirror(ctxhost_bin, ctxhost_home, capsys):
    first = started(ctxhost_bin, ctxhost_home)
    compacted = first.compress(conversation(8), current_tokens=5000)
    first.on_session_end("20261128_070000_abc123", compacted)
    mirror = first._mirror
    # A new process: Hermes reads its list back from state.db (no `_ctxhost` key, timestamps
    # added) and adds a turn.
    plugin.sidecar.shutdown_all()
    stored = [{k: v for k, v in m.items() if not k.startswith("_")} | {"timestamp": 1790000500.0} for m in compacted]
    resumed = stored + conversation(2, start=8)
    second = started(ctxhost_bin, ctxhost_home)
    positions = second._follow(resumed)
    assert positions[0] is None  # ctxhost's summary
    assert positions[-1] == mirror[0] + 3
    assert second._mirror[:2] == (mirror[0] + 4, M.fingerprint(resumed[-1]))
    assert second._mirror[2] is not None, "every sync sent its fingerprints: the chain is known"
    assert "starting it again" not in capsys.readouterr().err
    again = second.compress(resumed, current_tokens=5000)
    assert M.is_inserted(again[0]) and again[-1] is resumed[-1]


def test_a_history_that_does_not_hold_the_mirror_starts_it_again(ctxhost_bin, ctxhost_home, capsys):
    engine = started(ctxhost_bin, ctxhost_home)
    engine._follow(conversation(2))
    other = conversation(1, start=50)
    assert engine._follow(other) == [0, 1]
    assert engine._mirror[:2] == (2, M.fingerprint(other[-1]))
    assert "starting it again from Hermes' history" in capsys.readouterr().err


def hermes_compressor_stand_in(monkeypatch):
    """Records calls to Hermes' built-in compressor instead of asking a model for a summary."""
    from agent.context_compressor import ContextCompressor

    calls = []

    def compress(self, messages, current_tokens=None, focus_topic=None, force=False):
        calls.append(len(messages))
        return messages[-2:]

    monkeypatch.setattr(ContextCompressor, "compress", compress)
    return calls


def test_a_missing_binary_is_hermes_own_behaviour_with_a_warning(tmp_path, monkeypatch, capsys):
    calls = hermes_compressor_stand_in(monkeypatch)
    missing = str(tmp_path / "no-such-ctxhost")
    engine = started(missing, str(tmp_path / "home"))
    assert engine.get_tool_schemas() == []
    # Hermes' own threshold: 75% of the model's window.
    assert engine.threshold_tokens == int(131072 * 0.75)
    history = conversation(3)
    assert engine.compress(history) == history[-2:]
    assert calls == [6]
    answer = json.loads(engine.handle_tool_call("ctx_search", {"query": "x"}))
    assert "ctxhost is unavailable" in answer["error"] and "no-such-ctxhost" in answer["error"]
    err = capsys.readouterr().err
    assert f"could not run `{missing}`" in err
    assert "Hermes compacts with its built-in compressor" in err


@pytest.mark.parametrize("mode", ["exit", "hang"])
def test_a_sidecar_that_dies_or_hangs_is_hermes_own_behaviour(mode, tmp_path, monkeypatch, capsys):
    calls = hermes_compressor_stand_in(monkeypatch)
    # The stand-in speaks the protocol's start, then fails the first session request.
    binary = tmp_path / "ctxhost"
    binary.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} {mode}\n")
    binary.chmod(0o755)
    engine = CtxhostEngine(binary=str(binary), home=str(tmp_path / "home"), call_timeout_s=1.0)
    engine.bind_session_state(session_id="s1")
    engine.update_model("fake-model", 131072)
    assert engine.threshold_tokens == 2250
    history = conversation(3)
    assert engine.compress(history) == history[-2:]
    assert calls == [6]
    err = capsys.readouterr().err
    assert "compacting hermes:s1 through ctxhost failed" in err
    assert ("exited with code 3" in err) if mode == "exit" else ("did not answer session.bootstrap within 1.0 s" in err)


def test_a_new_message_equal_to_the_mirror_last_is_still_new(ctxhost_bin, ctxhost_home):
    engine = started(ctxhost_bin, ctxhost_home)
    ok = {"role": "user", "content": "ok"}
    history = [ok, {"role": "assistant", "content": "fine"}, dict(ok)]
    engine._follow(history[:1])
    assert engine._follow(history) == [0, 1, 2]
    assert engine._mirror[0] == 3


def test_a_mirror_rewritten_in_the_middle_under_hermes_is_noticed_by_the_syncs_base(ctxhost_bin, ctxhost_home, capsys):
    engine = started(ctxhost_bin, ctxhost_home)
    history = conversation(2)
    engine._follow(history)
    heard = engine._mirror
    # Another writer replaces the mirror with a history of the same length and the same last
    # message, other in the middle: only the chain tells the two apart.
    other = [M.to_agent(m) for m in history]
    other[1] = {"role": "assistant", "content": [{"type": "text", "text": "another reply"}]}
    fps = [M.fingerprint(m) for m in history]
    fps[1] = "another"
    rewritten = engine.sidecar.call("session.sync", {"sessionKey": engine.session_key, "from": 0, "messages": other,
                                                    "reset": True, "fingerprints": fps})
    assert rewritten["messageCount"] == heard[0] and rewritten["lastFingerprint"] == heard[1]
    assert rewritten["chain"] != heard[2]
    more = history + conversation(1, start=2)
    assert engine._follow(more)[-1] == heard[0] + 1
    assert "moved" in capsys.readouterr().err, "the tail's base named the history it extended"
    assert engine._mirror[0] == heard[0] + 2


def test_a_compaction_boundary_keeps_the_session_in_its_mirror(ctxhost_bin, ctxhost_home):
    engine = started(ctxhost_bin, ctxhost_home, session="s-old")
    engine.on_session_end("s-old", conversation(1))
    # Hermes rotating its session id at a compaction: the conversation goes on in the same mirror.
    engine.on_session_start("s-new", boundary_reason="compression", old_session_id="s-old")
    assert engine.session_key == "hermes:s-old"
    assert engine._follow(conversation(2)) == [0, 1, 2, 3]
    # A session Hermes starts anew is another mirror.
    engine.on_session_start("s-other")
    assert engine.session_key == "hermes:s-other"
    assert engine._follow(conversation(1)) == [0, 1]


def test_a_sidecar_killed_between_calls_is_started_again_with_the_session(ctxhost_bin, ctxhost_home, capsys):
    engine = started(ctxhost_bin, ctxhost_home)
    history = conversation(3)
    engine._follow(history)
    old = engine.sidecar.pid
    engine.sidecar.kill()
    # The next call notices, starts a new server, opens the session again from its mirror.
    hits = engine.handle_tool_call("ctx_search", {"query": "END-OF-PROMPT-2"}, messages=history)
    assert "END-OF-PROMPT-2" in hits, hits
    assert engine.sidecar.pid != old
    assert engine._mirror[:2] == (6, M.fingerprint(history[-1]))
    assert "the next call restarts it" in capsys.readouterr().err


def test_one_server_per_home_whatever_binary_another_engine_names(ctxhost_bin, ctxhost_home, capsys):
    first = started(ctxhost_bin, ctxhost_home)
    first.get_tool_schemas()
    second = CtxhostEngine(binary="/elsewhere/ctxhost", home=ctxhost_home)
    # `ctxhost serve` refuses a second server on a home: the second engine shares the first's.
    assert second.sidecar is first.sidecar
    assert "already serves in this process" in capsys.readouterr().err
