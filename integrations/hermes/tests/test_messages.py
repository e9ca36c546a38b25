"""The mapping between Hermes' OpenAI-format messages and ctxhost's AgentMessages."""

from conftest import plugin

M = plugin.messages
engine = plugin.engine


def test_hermes_keys_and_empty_content_do_not_change_a_fingerprint():
    live = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}]}
    stored = dict(live, content="", timestamp=1790000000.25, _db_persisted=True, finish_reason="tool_calls")
    assert M.fingerprint(live) == M.fingerprint(stored)
    other = dict(live, tool_calls=[{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"b\"}"}}])
    assert M.fingerprint(other) != M.fingerprint(live)


def test_user_assistant_and_tool_messages_become_agent_messages():
    history = [
        {"role": "user", "content": "read a", "timestamp": 1790000000.5},
        {"role": "assistant", "content": "", "reasoning": "think", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "file a"},
        {"role": "assistant", "content": "done", "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "x", "arguments": "not json"}}]},
    ]
    user, call, result, odd = M.to_agent_all(history)
    assert user == {"role": "user", "content": [{"type": "text", "text": "read a"}], "timestamp": 1790000000500}
    assert call["content"] == [
        {"type": "thinking", "thinking": "think"},
        {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a"}},
    ]
    assert call["stopReason"] == "toolUse"
    # The tool result learns its tool's name from the call before it.
    assert result == {"role": "toolResult", "toolCallId": "c1", "toolName": "read", "content": [{"type": "text", "text": "file a"}], "isError": False}
    assert odd["content"][1]["arguments"] == {"raw": "not json"}


def test_a_system_message_is_kept_as_it_is_without_hermes_keys():
    assert M.to_agent({"role": "system", "content": "s", "_db_persisted": True}) == {"role": "system", "content": "s"}


def test_inserted_and_rewritten_agent_messages_become_openai_messages():
    summary = {"role": "user", "content": [{"type": "text", "text": "Summary"}], "__ctxhost": {"inserted": True, "kind": "compactionSummary"}}
    out = M.from_agent(summary)
    assert out == {"role": "user", "content": "Summary", "_ctxhost": {"inserted": True, "kind": "compactionSummary"}}
    assert M.is_inserted(out)
    call = {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "toolCall", "id": "c9", "name": "grep", "arguments": {"q": 1}}]}
    assert M.from_agent(call) == {"role": "assistant", "content": "a", "tool_calls": [{"id": "c9", "type": "function", "function": {"name": "grep", "arguments": "{\"q\": 1}"}}]}
    result = {"role": "toolResult", "toolCallId": "c9", "content": [{"type": "text", "text": "[pruned]"}]}
    assert M.from_agent(result) == {"role": "tool", "tool_call_id": "c9", "content": "[pruned]"}


def test_an_inserted_summary_next_to_a_user_message_speaks_as_the_assistant():
    summary = M.from_agent({"role": "user", "content": "S", "__ctxhost": {"inserted": True, "kind": "compactionSummary"}})
    settled = M.settle_roles([summary, {"role": "user", "content": "next"}])
    assert settled[0]["role"] == "assistant"
    kept = M.from_agent({"role": "user", "content": "S", "__ctxhost": {"inserted": True, "kind": "compactionSummary"}})
    assert M.settle_roles([kept, {"role": "assistant", "content": "a"}])[0]["role"] == "user"


def test_a_plan_becomes_hermes_own_messages_and_the_inserted_ones():
    own = {0: {"role": "user", "content": "u0"}, 1: {"role": "assistant", "content": "a1"}, 2: {"role": "user", "content": "u2"},
           3: {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
           4: {"role": "tool", "tool_call_id": "c", "content": "long output"}}
    items = [
        {"message": {"role": "user", "content": [{"type": "text", "text": "S"}], "__ctxhost": {"inserted": True, "kind": "compactionSummary"}}},
        {"index": 1},
        {"from": 2, "to": 3},
        {"message": {"role": "toolResult", "toolCallId": "c", "content": [{"type": "text", "text": "[pruned]"}]}, "replaces": 4},
    ]
    out = engine.plan_to_messages(items, own)
    assert out[1] is own[1] and out[2] is own[2] and out[3] is own[3]
    assert out[0]["_ctxhost"]["inserted"] is True and out[0]["content"] == "S"
    # A rewritten position stays that position: not marked inserted, same call id.
    assert out[4] == {"role": "tool", "tool_call_id": "c", "content": "[pruned]"}
    engine.check_tool_pairs(out)


def test_a_plan_naming_a_message_hermes_no_longer_holds_is_refused():
    try:
        engine.plan_to_messages([{"index": 7}], {0: {"role": "user", "content": "u"}})
    except ValueError as err:
        assert "message 7" in str(err)
    else:
        raise AssertionError("a plan with an unknown position was accepted")


def test_a_tool_result_without_its_call_is_refused():
    try:
        engine.check_tool_pairs([{"role": "user", "content": "S"}, {"role": "tool", "tool_call_id": "gone", "content": "x"}])
    except ValueError as err:
        assert "'gone'" in str(err)
    else:
        raise AssertionError("an orphan tool result was accepted")


def test_settings_come_from_the_environment_then_hermes_config_then_defaults(tmp_path):
    config = {"context": {"ctxhost": {"binary": "/opt/ctxhost/bin/ctxhost", "home": str(tmp_path / "h"), "callTimeoutMs": 5000}}}
    assert engine.resolve_settings(env={}, config=config) == ("/opt/ctxhost/bin/ctxhost", str(tmp_path / "h"), 5.0)
    env = {"CTXHOST_BIN": "/x/ctxhost", "CTXHOST_HOME": str(tmp_path / "e")}
    assert engine.resolve_settings(env=env, config=config)[:2] == ("/x/ctxhost", str(tmp_path / "e"))
    binary, home, timeout = engine.resolve_settings(env={}, config={})
    assert binary == "ctxhost" and home.endswith(".ctxhost") and timeout == 30.0


def test_the_binary_can_be_set_in_hermes_config_yaml(tmp_path, monkeypatch):
    hermes_home = tmp_path / "hermes-home"
    hermes_home.mkdir()
    (hermes_home / "config.yaml").write_text(
        f"context:\n  engine: ctxhost\n  ctxhost:\n    binary: /opt/ctxhost/bin/ctxhost\n    home: {tmp_path / 'ch'}\n"
    )
    monkeypatch.setenv("HERMES_HOME", str(hermes_home))
    monkeypatch.delenv("CTXHOST_BIN", raising=False)
    monkeypatch.delenv("CTXHOST_HOME", raising=False)
    binary, home, _ = engine.CtxhostEngine().settings
    assert (binary, home) == ("/opt/ctxhost/bin/ctxhost", str(tmp_path / "ch"))


def test_the_compaction_budget_leaves_room_for_what_hermes_sends_besides_the_messages():
    messages = [{"role": "user", "content": "x" * 4000}]
    own = __import__("agent.model_metadata", fromlist=["x"]).estimate_messages_tokens_rough(messages)
    # Hermes' request: the messages and 2,000 tokens of system prompt and tool schemas.
    assert engine.message_budget(8000, own + 2000, messages) == 6000
    # Without Hermes' estimate, the whole window; an overhead past half the window is capped.
    assert engine.message_budget(8000, None, messages) == 8000
    assert engine.message_budget(8000, own + 7000, messages) == 4000
    assert engine.message_budget(0, own + 2000, messages) == 0
