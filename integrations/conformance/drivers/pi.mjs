#!/usr/bin/env node
// Replays the fixture through the pi extension (integrations/pi/index.js) the way pi fires its
// events (shared/PI.md), and writes what the model would get at each call and what ctx_search
// answers at the end.
//
//   node pi.mjs --fixture conversation.json --home DIR --binary ctxhost --out record.json
//
// - The extension is loaded into pi's stand-in from its own tests (pi/test-support/harness.js:
//   its ExtensionAPI, ctx and session manager over a branch of entries), session_start first.
// - A model call is a `context` event with pi's list (its context after the last compaction,
//   plus the messages of the prompt not saved yet: the prompt at the first call), then
//   `before_provider_request`; the model gets the list the handler returns. pi saves the prompt
//   after the first call and each reply and tool result as it comes; `agent_end` ends a prompt.
// - A manual compaction (`/compact`) is `session_before_compact` with reason "manual"; pi writes
//   the compaction the extension returns as its own entry (then `session_compact`).

import { assistantMessage } from "../../client/test-support/common.js";
import { Branch, loadExtension, sidecars } from "../../pi/test-support/harness.js";
import { agentItem, callPoints } from "../neutral.mjs";
import { driverArgs, MODEL_WINDOW, writeRecord } from "./args.mjs";

const SESSION_ID = "7d41b0c3-conformance";
/** pi's default `compaction.reserveTokens`. */
const RESERVE_TOKENS = 16_384;

const { fixture, home, binary, out } = driverArgs();

/** A fixture message as pi stores it. @param {any} m */
function native(m) {
  const timestamp = Date.parse(m.at);
  if (m.role === "user") return { role: "user", content: [{ type: "text", text: m.text }], timestamp };
  if (m.role === "assistant") {
    return assistantMessage(m.text, (m.toolCalls ?? []).map((/** @type {any} */ c) => [c.id, c.name, c.arguments]), timestamp);
  }
  return { role: "toolResult", toolCallId: m.toolCallId, toolName: m.toolName, content: [{ type: "text", text: m.text }], isError: m.isError, timestamp };
}

const branch = new Branch();
const ext = loadExtension({ home, binary, branch, sessionId: SESSION_ID, contextWindow: MODEL_WINDOW });
await ext.emit("session_start", { reason: "startup" });

/** Fails the replay when a handler threw (pi would log it and go on as if the extension were not there). */
function noErrors(/** @type {string} */ where) {
  if (ext.errors.length) throw new Error(`${where}: ${ext.errors.join("; ")}`);
}

/** @type {import("../neutral.mjs").ModelCall[]} */
const record = [];
for (const [t, turn] of fixture.turns.entries()) {
  if (turn.compactBefore) {
    const preparation = {
      firstKeptEntryId: branch.entries.at(-1)?.id,
      messagesToSummarize: [],
      turnPrefixMessages: [],
      isSplitTurn: false,
      tokensBefore: 0,
      fileOps: {},
      settings: { enabled: true, reserveTokens: RESERVE_TOKENS, keepRecentTokens: 20_000 },
    };
    const r = await ext.emit("session_before_compact", {
      preparation,
      branchEntries: branch.entries,
      reason: "manual",
      signal: new AbortController().signal,
    });
    noErrors(`compaction before turn ${t}`);
    if (r?.compaction) {
      const entry = branch.compact(r.compaction);
      await ext.emit("session_compact", { compactionEntry: entry, fromExtension: true });
    }
  }
  const messages = turn.messages.map(native);
  let saved = 0;
  for (const [call, upTo] of callPoints(turn).entries()) {
    // What pi has saved by this call: everything before it but the prompt at the first call.
    if (call > 0) {
      branch.append(...messages.slice(saved, upTo));
      saved = upTo;
    }
    const list = call === 0 ? [...branch.context(), messages[0]] : branch.context();
    const r = await ext.emit("context", { messages: list });
    noErrors(`turn ${t}, model call ${call}`);
    await ext.emit("before_provider_request", { payload: { model: "fake-model", messages: [{ role: "system", content: "You are pi." }] } });
    record.push({ turn: t, call, messages: (r?.messages ?? list).map(agentItem) });
    if (call === 0) {
      branch.append(messages[0]);
      saved = 1;
    }
  }
  branch.append(...messages.slice(saved));
  await ext.emit("agent_end", { messages });
  noErrors(`the end of turn ${t}`);
}

const search = ext.tools.find((tool) => tool.name === "ctx_search");
if (!search) throw new Error("the extension registered no ctx_search");
const recall = [];
for (const [i, query] of fixture.queries.entries()) {
  let text;
  try {
    const answer = await search.execute(`call_recall_${i}`, { query });
    text = answer.content.map((/** @type {any} */ c) => c.text).join("\n");
  } catch (err) {
    // pi marks a failed tool call by the throw; its message is what the model reads.
    text = `error: ${err instanceof Error ? err.message : err}`;
  }
  recall.push({ query, text });
}
await writeRecord(out, { agent: "pi", home, calls: record, recall }, sidecars());
