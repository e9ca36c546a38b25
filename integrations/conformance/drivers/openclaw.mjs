#!/usr/bin/env node
// Replays the fixture through the OpenClaw plugin (integrations/openclaw/index.js) the way
// OpenClaw 2026.9.6 calls it (shared/OPENCLAW.md, "What the runtime really does"), and writes
// what the model would get at each call and what ctx_search answers at the end.
//
//   node openclaw.mjs --fixture conversation.json --home DIR --binary ctxhost --out record.json
//
// - The plugin is registered as OpenClaw does (register(api)); every turn builds an engine with
//   the registered factory: bootstrap → maintain → assemble (the history without the pending
//   prompt, which the runtime appends) → the loop hook's assemble before each model call
//   (the engine's own output followed by the turn's newer messages) → commitTurn → maintain →
//   dispose.
// - A manual compaction (`openclaw sessions compact`) is the engine's compact({ force: true })
//   between turns, with the runtime's token budget.
// - Messages are OpenClaw's shape: pi's AgentMessages plus OpenClaw's own fields.

import { assistantMessage } from "../../client/test-support/common.js";
import plugin from "../../openclaw/index.js";
import { agentItem, callPoints } from "../neutral.mjs";
import { driverArgs, MODEL_WINDOW, writeRecord } from "./args.mjs";

const KEY = "agent:main:main";
const SESSION_ID = "5f0c2a9e-conformance";

const { fixture, home, binary, out } = driverArgs();

/** @type {((ctx: any) => any) | undefined} */
let factory;
/** @type {((ctx: any) => any[]) | undefined} */
let toolFactory;
const log = (/** @type {string} */ m) => process.stderr.write(`[openclaw driver] ${m}\n`);
plugin.register({
  pluginConfig: { binary, home, callTimeoutMs: 60_000 },
  registrationMode: "full",
  logger: { info: log, warn: log },
  registerContextEngine: (/** @type {string} */ _id, /** @type {any} */ f) => (factory = f),
  registerTool: (/** @type {any} */ f) => (toolFactory = f),
});
if (!factory || !toolFactory) throw new Error("the plugin registered no context engine or no tools");

/** A fixture message as OpenClaw stores it. @param {any} m */
function native(m) {
  const timestamp = Date.parse(m.at);
  if (m.role === "user") {
    return { role: "user", content: m.text, timestamp, __openclaw: { senderIsOwner: true }, idempotencyKey: `k-${timestamp}:user` };
  }
  if (m.role === "assistant") {
    const calls = (m.toolCalls ?? []).map((/** @type {any} */ c) => [c.id, c.name, c.arguments]);
    return { ...assistantMessage(m.text, calls, timestamp), __openclaw: { turn: timestamp } };
  }
  return { role: "toolResult", toolCallId: m.toolCallId, toolName: m.toolName, content: [{ type: "text", text: m.text }], isError: m.isError, timestamp };
}

const session = { sessionId: SESSION_ID, sessionKey: KEY };
/** One engine per turn, as OpenClaw builds it. */
async function engineForTurn() {
  const engine = await factory?.({ config: {}, agentDir: home, workspaceDir: home });
  const boot = await engine.bootstrap({ ...session, sessionFile: KEY });
  if (!boot.bootstrapped) throw new Error(`bootstrap failed: ${boot.reason}`);
  await engine.maintain({ ...session, sessionFile: KEY });
  return engine;
}

/** @type {any[]} */
const history = [];
/** @type {import("../neutral.mjs").ModelCall[]} */
const record = [];
for (const [t, turn] of fixture.turns.entries()) {
  if (turn.compactBefore) {
    const engine = await engineForTurn();
    const r = await engine.compact({ ...session, tokenBudget: MODEL_WINDOW, force: true });
    if (!r.ok) throw new Error(`compact before turn ${t} failed: ${r.reason}`);
    log(`compaction before turn ${t}: ${r.compacted ? `${r.result.tokensBefore} → ${r.result.tokensAfter} tokens` : `none (${r.reason})`}`);
    await engine.dispose();
  }
  const engine = await engineForTurn();
  const messages = turn.messages.map(native);
  const prompt = messages[0];
  const first = await engine.assemble({ ...session, messages: history, tokenBudget: MODEL_WINDOW, prompt: prompt.content, model: "fake/fake-model" });
  // The runtime's loop hook, before the model call: the engine's own output handed back.
  const hook = await engine.assemble({ ...session, messages: first.messages, tokenBudget: MODEL_WINDOW, model: "fake/fake-model" });
  /** What the model got at the last call (the runtime hands it back with the newer messages). */
  let sent = [...hook.messages, prompt];
  let sentUpTo = 1;
  for (const [call, upTo] of callPoints(turn).entries()) {
    if (call > 0) {
      const newer = messages.slice(sentUpTo, upTo);
      const again = await engine.assemble({ ...session, messages: [...sent, ...newer], tokenBudget: MODEL_WINDOW, model: "fake/fake-model" });
      sent = again.messages;
      sentUpTo = upTo;
    }
    record.push({ turn: t, call, messages: sent.map(agentItem) });
  }
  const committed = await engine.commitTurn({ ...session, advancementKey: `turn-${t}`, messages });
  if (committed.status !== "committed") throw new Error(`commitTurn of turn ${t}: ${committed.status}`);
  await engine.maintain({ ...session, sessionFile: KEY });
  await engine.dispose();
  history.push(...messages);
}

const search = toolFactory({ sessionKey: KEY, sessionId: SESSION_ID }).find((tool) => tool.name === "ctx_search");
const recall = [];
for (const [i, query] of fixture.queries.entries()) {
  const answer = await search.execute(`call_recall_${i}`, { query });
  recall.push({ query, text: answer.content.map((/** @type {any} */ c) => c.text).join("\n") });
}
// The bridges of this process (one per CTXHOST_HOME, kept by the plugin on globalThis).
const bridges = /** @type {Map<string, any>} */ (/** @type {any} */ (globalThis)[Symbol.for("ctxhost.openclaw.bridges")]);
await writeRecord(out, { agent: "openclaw", home, calls: record, recall }, [...bridges.values()].map((b) => b.sidecar));
