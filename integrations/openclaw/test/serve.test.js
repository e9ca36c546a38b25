// The engine against a real `ctxhost serve` child: every hook, the mirror's guarantees, and the
// sidecar's life (restart, timeout, idle unref, exit with its parent).
//
//   node --test integrations/openclaw/test/*.test.js     (CTXHOST_BIN overrides the binary)

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { describe, test } from "node:test";
import { pathToFileURL } from "node:url";
import { fingerprint } from "../../client/fingerprint.js";
import { SidecarError } from "../../client/sidecar.js";
import { RECALL_TOOLS, openclawTools } from "../src/tools.js";
import {
  BINARY,
  PACKAGE_DIR,
  alive,
  assistant,
  bigTurn,
  files,
  readMirror,
  setup,
  skipServe,
  smallWindow,
  tempHome,
  toolResult,
  user,
  waitFor,
} from "../test-support/harness.js";

const KEY = "agent:main:main";
const SID = "0b7d3c1e-session";
const skip = skipServe();

/** @param {ReturnType<typeof setup>} s */
function sessionFiles(s, home) {
  return files(join(home, "sessions"));
}

/** The mirror file of KEY (not a .reset-/.torn- copy, nor the turn ledger beside it). @param {string} home */
function mirrorOf(home, key = KEY) {
  const tail = key.split(":").slice(2).join(":");
  const found = files(join(home, "sessions")).filter((f) => f.endsWith(".jsonl") && !f.includes(".ledger.") && f.includes(tail));
  assert.equal(found.length, 1, `one mirror file for ${key}: ${found.join(", ")}`);
  return found[0];
}

const markers = (/** @type {string} */ path) =>
  readMirror(path).filter((e) => e.type === "custom" && e.customType === "ctxhost.mirror");

/**
 * Commits turns as OpenClaw does and returns the whole history.
 * @param {any} engine
 * @param {any[][]} turns
 * @param {string} [prefix]
 */
async function commitAll(engine, turns, prefix = "turn") {
  const history = [];
  for (const [i, messages] of turns.entries()) {
    const r = await engine.commitTurn({ sessionId: SID, sessionKey: KEY, advancementKey: `${prefix}-${i}`, messages });
    assert.equal(r.status, "committed");
    history.push(...messages);
  }
  return history;
}

describe("ctxhost serve behind the OpenClaw engine", { skip, concurrency: false }, () => {
  test("the sidecar starts lazily on the first hook and answers initialize", async (t) => {
    const home = tempHome({ plugins: { slots: { contextEngine: "legacy" } } });
    const s = setup({ home });
    t.after(s.cleanup);
    assert.equal(s.sidecar.running, false, "building the engine starts nothing");
    const r = await s.engine.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
    assert.equal(r.bootstrapped, true, r.reason);
    assert.equal(s.sidecar.running, true);
    assert.deepEqual(s.methods(), ["initialize", "session.bootstrap"]);
    const init = s.sidecar.initialized;
    assert.equal(init.protocolVersion, 1);
    assert.equal(init.engine.id, "legacy");
    assert.equal(typeof init.contextWindow, "number");
    assert.match(r.reason, /legacy/);
  });

  test("commitTurn writes each turn once, verbatim; the same key again is a duplicate, also after a restart", async (t) => {
    const home = tempHome();
    let s = setup({ home });
    t.after(() => s.cleanup());
    await s.engine.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
    const turn = [user("first question"), assistant("first answer")];
    const params = { sessionId: SID, sessionKey: KEY, advancementKey: "adv-1", messages: turn };
    assert.deepEqual(await s.engine.commitTurn(params), { status: "committed" });
    assert.deepEqual(await s.engine.commitTurn(params), { status: "duplicate" });
    const path = mirrorOf(home);
    assert.equal(markers(path).length, 1);
    const stored = readMirror(path).filter((e) => e.type === "message").map((e) => e.message);
    assert.deepEqual(stored, turn, "messages, with __openclaw and idempotencyKey, survive");

    await s.sidecar.shutdown();
    s = setup({ home });
    assert.deepEqual(await s.engine.commitTurn(params), { status: "duplicate" }, "the key survives a restart");
    assert.equal(markers(path).length, 1);
    const marker = markers(path)[0].data;
    assert.equal(marker.advancementKey, "adv-1");
    assert.equal(marker.lastFingerprint, fingerprint(turn[1]));
  });

  test("assemble in step sends a count and a fingerprint, not the history; legacy passes it through", async (t) => {
    const home = tempHome();
    const s = setup({ home });
    t.after(s.cleanup);
    await s.engine.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
    const history = await commitAll(s.engine, [
      [user("q1"), assistant("a1", [["c1", "read", { path: "a.txt" }]]), toolResult("c1", "read", "contents"), assistant("done")],
      [user("q2"), assistant("a2")],
    ]);
    s.reset();
    const out = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: history, tokenBudget: 50_000, prompt: "q3", model: "fake-model", availableTools: new Set(["read"]) });
    assert.deepEqual(s.methods(), ["session.assemble"], "no sync");
    assert.ok(s.calls[0].bytesOut < 600, `the request does not carry the history (${s.calls[0].bytesOut} B)`);
    assert.deepEqual(out.messages, history);
    assert.ok(out.messages.every((m, i) => m === history[i]), "the runtime's own objects come back");
    assert.equal(typeof out.estimatedTokens, "number");
  });

  test("a turn that bypassed the engine is synced as a tail; a rewritten history resets the mirror", async (t) => {
    const home = tempHome();
    const s = setup({ home });
    t.after(s.cleanup);
    await s.engine.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
    const turn1 = [user("q1"), assistant("a1")];
    const bypassed = [user("q2 (legacy turn)"), assistant("a2")];
    await commitAll(s.engine, [turn1]);
    s.reset();
    let history = [...turn1, ...bypassed];
    let out = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: history, tokenBudget: 50_000 });
    assert.deepEqual(s.methods(), ["session.assemble", "session.sync", "session.assemble"]);
    assert.deepEqual(out.messages, history);
    assert.ok(s.logs.some((l) => /syncing the tail/.test(l)), s.logs.join("\n"));

    // The next committed turn lines up with the synced tail.
    const turn3 = [user("q3"), assistant("a3")];
    await s.engine.commitTurn({ sessionId: SID, sessionKey: KEY, advancementKey: "turn-3", messages: turn3 });
    history = [...history, ...turn3];
    s.reset();
    out = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: history, tokenBudget: 50_000 });
    assert.deepEqual(s.methods(), ["session.assemble"], "in step again");
    assert.deepEqual(out.messages, history);
    assert.equal(sessionFiles(s, home).filter((f) => f.includes(".reset-")).length, 0);

    // A history that does not start with the mirror (rewritten by the runtime): reset.
    const rewritten = [user("a different beginning"), assistant("indeed")];
    s.reset();
    out = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: rewritten, tokenBudget: 50_000 });
    assert.deepEqual(s.methods(), ["session.assemble", "session.sync", "session.assemble"]);
    assert.deepEqual(out.messages, rewritten);
    assert.equal(sessionFiles(s, home).filter((f) => f.includes(".reset-")).length, 1, "the old mirror is kept");
    const stored = readMirror(mirrorOf(home)).filter((e) => e.type === "message").map((e) => e.message);
    assert.deepEqual(stored, rewritten);
  });

  test("a history rewritten only in the middle (same length, same last message) resets the mirror; the old one is kept", async (t) => {
    const home = tempHome();
    const s = setup({ home });
    t.after(s.cleanup);
    await s.engine.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
    const turns = [[user("q1"), assistant("a1")], [user("q2"), assistant("a2")], [user("q3"), assistant("done")]];
    const history = await commitAll(s.engine, turns);
    const rewritten = history.map((m, i) => (i === 2 ? user("q2, as the runtime rewrote it") : m));
    s.reset();
    const out = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: rewritten, tokenBudget: 50_000 });
    assert.deepEqual(s.methods(), ["session.assemble", "session.sync", "session.assemble"]);
    assert.deepEqual(out.messages, rewritten);
    assert.ok(s.logs.some((l) => /resetting it/.test(l)), s.logs.join("\n"));
    assert.equal(sessionFiles(s, home).filter((f) => f.includes(".reset-")).length, 1, "the old mirror is kept");
    const stored = readMirror(mirrorOf(home)).filter((e) => e.type === "message").map((e) => e.message);
    assert.deepEqual(stored, rewritten);
  });

  test("compaction inserts a marked summary; the second assemble of the turn gets its own output back and does not resync", async (t) => {
    const home = tempHome(smallWindow("legacy", 4000));
    const s = setup({ home });
    t.after(s.cleanup);
    await s.engine.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
    const history = await commitAll(s.engine, [bigTurn("alpha"), bigTurn("beta"), bigTurn("gamma"), bigTurn("delta")]);
    s.reset();
    const first = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: history, tokenBudget: 100_000 });
    assert.deepEqual(s.methods(), ["session.assemble"]);
    const inserted = first.messages.filter((m) => m.__ctxhost?.inserted === true);
    assert.ok(inserted.length >= 1, "a compaction summary was inserted");
    assert.ok(["user", "assistant", "toolResult"].includes(inserted[0].role));
    assert.ok(first.messages.length < history.length, "older messages were compacted away");
    assert.ok(first.estimatedTokens <= 4000, `within the window (${first.estimatedTokens})`);
    assert.ok(first.messages.every((m) => typeof m.timestamp === "number" && m.timestamp > 0), "every message has a timestamp");

    // OpenClaw's loop hook: the engine's own output, before the model call.
    s.reset();
    const second = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: first.messages, tokenBudget: 100_000 });
    assert.deepEqual(s.methods(), [], "recognised without asking the server");
    assert.deepEqual(second.messages, first.messages);
    assert.equal(second.systemPromptAddition, first.systemPromptAddition);

    // The mirror was not touched: the next turn commits and assembles in step.
    const turn5 = [user("epsilon"), assistant("ok")];
    await s.engine.commitTurn({ sessionId: SID, sessionKey: KEY, advancementKey: "turn-5", messages: turn5 });
    s.reset();
    const next = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: [...history, ...turn5], tokenBudget: 100_000 });
    assert.deepEqual(s.methods(), ["session.assemble"], "no sync, no reset");
    assert.ok(next.messages.some((m) => m.__ctxhost?.inserted));
    assert.equal(files(join(home, "sessions")).filter((f) => f.includes(".reset-")).length, 0);
    assert.equal(markers(mirrorOf(home)).length, 5);
  });

  test("a new session's first turn: the loop hook's empty output with the turn's tool round is not history", async (t) => {
    const home = tempHome({ plugins: { slots: { contextEngine: "legacy" } } });
    const s = setup({ home });
    t.after(s.cleanup);
    await s.engine.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
    const first = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: [], tokenBudget: 100_000 });
    assert.deepEqual(first.messages, []);
    const turn = [user("read a.txt"), assistant("reading", [["call-1", "read", { path: "a.txt" }]]), toolResult("call-1", "read", "contents"), assistant("done")];
    s.reset();
    const hook = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: turn.slice(0, 3), tokenBudget: 100_000 });
    assert.deepEqual(hook.messages, turn.slice(0, 3));
    assert.deepEqual(s.methods(), [], "answered as its own output, nothing synced");
    await s.engine.commitTurn({ sessionId: SID, sessionKey: KEY, advancementKey: "turn-0", messages: turn });
    s.reset();
    await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: turn, tokenBudget: 100_000 });
    assert.deepEqual(s.methods(), ["session.assemble"], "the next turn is in step: no sync, no reset");
    const stored = readMirror(mirrorOf(home)).filter((e) => e.type === "message").map((e) => e.message);
    assert.deepEqual(stored, turn, "the turn once");
  });

  test("checkpoint-manager: its gauge is an inserted note (never the system prompt), its restore follows a compaction, stamped with a time", async (t) => {
    const home = tempHome(smallWindow("checkpoint-manager", 4000));
    const s = setup({ home });
    t.after(s.cleanup);
    await s.engine.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
    const turns = [bigTurn("alpha"), bigTurn("beta"), bigTurn("gamma")];
    let history = await commitAll(s.engine, turns);
    const gauge = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: history, tokenBudget: 100_000 });
    assert.equal(gauge.systemPromptAddition, undefined, "the gauge never changes the start of the request");
    const notes = gauge.messages.filter((m) => m.__ctxhost?.inserted).map((m) => JSON.stringify(m.content));
    assert.ok(notes.some((x) => /\[Context: \d+% \| /.test(x)), `the gauge note at ~75% of the window among ${notes.length} inserted messages`);
    const turn4 = bigTurn("delta");
    await s.engine.commitTurn({ sessionId: SID, sessionKey: KEY, advancementKey: "turn-3", messages: turn4 });
    history = [...history, ...turn4];
    const out = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: history, tokenBudget: 100_000 });
    const texts = out.messages.filter((m) => m.__ctxhost?.inserted).map((m) => JSON.stringify(m.content));
    assert.ok(texts.some((x) => x.includes("[Checkpoint ")), `a checkpoint restore among ${texts.length} inserted messages`);
    assert.ok(out.messages.every((m) => typeof m.timestamp === "number" && m.timestamp > 0), "every message has a timestamp");
  });

  test("OpenClaw's tokenBudget bounds what assemble returns, also when a tool loop grows the turn", async (t) => {
    const home = tempHome({ ...smallWindow("legacy", 100_000) });
    const s = setup({ home });
    t.after(s.cleanup);
    await s.engine.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
    const history = await commitAll(s.engine, [bigTurn("one"), bigTurn("two"), bigTurn("three"), bigTurn("four"), bigTurn("five")]);
    const budget = 4000;
    const out = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: history, tokenBudget: budget });
    assert.ok(out.estimatedTokens <= budget, `${out.estimatedTokens} <= ${budget}`);
    assert.ok(out.messages.length < history.length);
    assert.ok(out.messages.some((m) => m.__ctxhost?.inserted), "compacted by the budget, not the 100k window");

    // The loop hook hands the output back with the turn's tool call and result after it, and a
    // budget the runtime already reduced by them: ctxhost assembles the history again for what
    // is left (compacting further), nothing is dropped blindly.
    const room = budget - out.estimatedTokens;
    const big = "x".repeat(Math.max(400, (room + 300) * 4));
    const newer = [assistant("reading", [["call-1", "read", { path: "big.txt" }]]), toolResult("call-1", "read", big)];
    s.reset();
    const grown = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: [...out.messages, ...newer], tokenBudget: budget });
    assert.deepEqual(s.methods(), ["session.assemble"], "one in-step assemble, no sync");
    assert.ok(grown.estimatedTokens <= budget, `${grown.estimatedTokens} <= ${budget}`);
    assert.deepEqual(grown.messages.slice(-2), newer, "the turn's own messages stay, at the end");
    assert.ok(grown.messages.some((m) => m.__ctxhost?.inserted));
    assert.ok(!s.logs.some((l) => /dropped/.test(l)), s.logs.join("\n"));
    assert.equal(files(join(home, "sessions")).filter((f) => f.includes(".reset-")).length, 0);
  });

  test("without a history to assemble again, the oldest messages are dropped client-side, in pairs, with a log line", async (t) => {
    const home = tempHome();
    const s = setup({ home });
    t.after(s.cleanup);
    // Messages carrying ctxhost's marker are never synced into the mirror, even when this
    // process did not produce them (another attempt of the turn).
    const summary = { role: "user", content: [{ type: "text", text: "summary of earlier turns" }], __ctxhost: { inserted: true, kind: "compactionSummary" } };
    const messages = [
      summary,
      user("old ".repeat(1000)),
      assistant("calling", [["c1", "read", { path: "a" }]]),
      toolResult("c1", "read", "y".repeat(4000)),
      user("recent question"),
    ];
    s.reset();
    const out = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages, tokenBudget: 200 });
    assert.deepEqual(s.methods(), [], "no call, no sync");
    assert.deepEqual(out.messages, [summary, messages[4]], "the summary and the newest message stay; the tool call goes with its result");
    assert.ok(out.estimatedTokens <= 200);
    assert.ok(s.logs.some((l) => /over the budget of 200: dropped the 3 oldest message/.test(l)), s.logs.join("\n"));
  });

  test("compact, afterTurn, subagent hooks and maintain map to the protocol", async (t) => {
    const home = tempHome(smallWindow("legacy", 100_000));
    const s = setup({ home });
    t.after(s.cleanup);
    await s.engine.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
    const history = await commitAll(s.engine, [bigTurn("one"), bigTurn("two"), bigTurn("three"), bigTurn("four")]);
    s.reset();
    const c = await s.engine.compact({ sessionId: SID, sessionKey: KEY, force: true, tokenBudget: 2000, customInstructions: "keep the notes about four" });
    assert.deepEqual(s.methods(), ["session.compact"]);
    assert.equal(c.ok, true, c.reason);
    assert.equal(c.compacted, true, c.reason);
    assert.ok(c.result.tokensAfter < c.result.tokensBefore, JSON.stringify(c.result));
    const out = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: history, tokenBudget: 100_000 });
    assert.ok(out.messages.some((m) => m.__ctxhost?.inserted), "the summary is in the context");
    assert.ok(out.messages.length < history.length);

    s.reset();
    await s.engine.afterTurn({ sessionId: SID, sessionKey: KEY, sessionFile: KEY, messages: history, prePromptMessageCount: history.length - 2, tokenBudget: 100_000 });
    assert.deepEqual(s.methods(), ["session.afterTurn"]);

    s.reset();
    const child = "agent:main:subagent:child-1";
    const prep = await s.engine.prepareSubagentSpawn({ parentSessionKey: KEY, childSessionKey: child, contextMode: "isolated", ttlMs: 60_000 });
    assert.ok(prep === undefined || typeof prep.rollback === "function");
    if (prep) await prep.rollback();
    await s.engine.onSubagentEnded({ childSessionKey: child, reason: "completed" });
    assert.deepEqual(
      s.methods().filter((m) => m !== "subagent.rollback"),
      ["subagent.prepareSpawn", "subagent.ended"],
    );
    assert.ok(!s.logs.some((l) => l.startsWith("warn")), s.logs.join("\n"));
    assert.deepEqual(await s.engine.maintain({ sessionId: SID, sessionKey: KEY, sessionFile: KEY }), { changed: false, bytesFreed: 0, rewrittenEntries: 0 });
    assert.deepEqual(await s.engine.ingest({ sessionId: SID, message: user("x") }), { ingested: false });
    assert.deepEqual(await s.engine.ingestBatch({ sessionId: SID, messages: [user("x")] }), { ingestedCount: 0 });
  });

  test("dispose closes the sessions an instance opened, once no other instance holds them; the sidecar stays", async (t) => {
    const home = tempHome();
    const s = setup({ home });
    t.after(s.cleanup);
    const a = s.engine;
    const b = s.another();
    await a.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
    await b.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
    const pid = s.sidecar.pid;
    s.reset();
    await a.dispose();
    assert.deepEqual(s.methods(), [], "b still holds the session");
    await b.dispose();
    assert.deepEqual(s.methods(), ["session.close"]);
    assert.equal(s.sidecar.pid, pid, "the sidecar stays up for the next turn");
    // A later instance that skips bootstrap gets the session opened for it.
    const c = s.another();
    s.reset();
    await c.commitTurn({ sessionId: SID, sessionKey: KEY, advancementKey: "after-close", messages: [user("hi"), assistant("ho")] });
    assert.deepEqual(s.methods(), ["session.commitTurn", "session.bootstrap", "session.commitTurn"]);
    await c.dispose();
  });

  test("memory-flush sessions (internal-session-effects) leave no mirror behind", async (t) => {
    const home = tempHome();
    const s = setup({ home });
    t.after(s.cleanup);
    const key = "agent:main:internal-session-effects:6f1c2a3b-0000-4000-8000-000000000001";
    await s.engine.bootstrap({ sessionId: "flush", sessionKey: key, sessionFile: key });
    await s.engine.commitTurn({ sessionId: "flush", sessionKey: key, advancementKey: "f1", messages: [user("flush"), assistant("NO_REPLY")] });
    await s.engine.dispose();
    assert.deepEqual(files(join(home, "sessions")).filter((f) => f.includes("internal-session-effects")), []);
  });

  test("recall tools: after a compaction, ctx_search finds a compacted message and ctx_expand gives its original text", async (t) => {
    const home = tempHome(smallWindow("legacy", 4000));
    const s = setup({ home });
    t.after(s.cleanup);
    await s.engine.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
    const turns = [bigTurn("alpha"), bigTurn("beta"), bigTurn("gamma"), bigTurn("delta")];
    turns[0][0].content += " The launch code word is periwinkle-zebra.";
    const history = await commitAll(s.engine, turns);
    const out = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: history, tokenBudget: 100_000 });
    assert.ok(!JSON.stringify(out.messages).includes("periwinkle"), "the first turn was compacted out of the context");

    const [search, expand] = openclawTools(() => s.sidecar, { sessionKey: KEY, sessionId: SID });
    const text = (/** @type {any} */ r) => r.content.map((/** @type {any} */ c) => c.text).join("");
    const found = await search.execute("call-1", { query: "periwinkle zebra" });
    assert.equal(found.details.status, "ok", text(found));
    const hit = text(found).split("\n").find((l) => /^- \S+ · user · .*compacted/.test(l));
    assert.ok(hit, `a compacted user message among the hits:\n${text(found)}`);
    const id = /^- (\S+) · /.exec(hit)[1];
    const opened = await expand.execute("call-2", { id, maxTokens: 4000 });
    assert.equal(opened.details.status, "ok", text(opened));
    assert.ok(text(opened).includes(turns[0][0].content), "the original text, whole");

    // A bad argument: an error result naming the field, and the turn goes on.
    const bad = await search.execute("call-3", { query: 3 });
    assert.equal(bad.details.status, "error");
    assert.match(text(bad), /ctx_search: .*arguments\.query: invalid type/);
    const none = await expand.execute("call-4", { id: "00000000" });
    assert.equal(none.details.status, "error", text(none));
    assert.deepEqual(s.logs.filter((l) => l.startsWith("warn")), []);
  });

  test("recall tools: the plugin declares the arguments the server checks (names, types, bounds, required)", async (t) => {
    const home = tempHome();
    const s = setup({ home });
    t.after(s.cleanup);
    await s.engine.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
    const { tools } = await s.sidecar.call("session.tools", { sessionKey: KEY });
    const shape = (/** @type {any} */ schema) => ({
      required: schema.required ?? [],
      additionalProperties: schema.additionalProperties,
      properties: Object.fromEntries(
        Object.entries(schema.properties ?? {}).map(([k, v]) => {
          const { description, ...rest } = /** @type {any} */ (v);
          return [k, rest];
        }),
      ),
    });
    for (const mine of RECALL_TOOLS) {
      const theirs = tools.find((/** @type {any} */ x) => x.name === mine.name);
      assert.ok(theirs, `the server offers ${mine.name}`);
      assert.equal(theirs.source, "host");
      assert.deepEqual(shape(mine.parameters), shape(theirs.parameters), mine.name);
    }
  });

  test("recall tools: a killed sidecar is restarted and the tool call answered on the new one", async (t) => {
    const home = tempHome();
    const s = setup({ home });
    t.after(s.cleanup);
    await s.engine.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
    await commitAll(s.engine, [[user("the socket timeout is 4711 ms"), assistant("noted")]]);
    const first = s.sidecar.pid;
    s.sidecar.kill("SIGKILL");
    assert.ok(await waitFor(() => !s.sidecar.running));
    const [search] = openclawTools(() => s.sidecar, { sessionKey: KEY });
    const r = await search.execute("c", { query: "socket timeout" });
    assert.equal(r.details.status, "ok", r.content[0].text);
    assert.match(r.content[0].text, /4711/);
    assert.notEqual(s.sidecar.pid, first);
  });

  test("a killed sidecar is restarted, the session bootstrapped again and the call retried", async (t) => {
    const home = tempHome();
    const s = setup({ home });
    t.after(s.cleanup);
    await s.engine.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
    const history = await commitAll(s.engine, [[user("q1"), assistant("a1")]]);
    const first = s.sidecar.pid;
    s.sidecar.kill("SIGKILL");
    assert.ok(await waitFor(() => !s.sidecar.running), "the exit was noticed");
    s.reset();
    const out = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: history, tokenBudget: 50_000 });
    assert.deepEqual(out.messages, history);
    assert.notEqual(s.sidecar.pid, first);
    assert.equal(s.sidecar.generation, 2);
    assert.deepEqual(s.methods(), ["initialize", "session.assemble", "session.bootstrap", "session.assemble"]);
    assert.ok(s.logs.some((l) => /killed by SIGKILL; the next call restarts it/.test(l)), s.logs.join("\n"));

    // Killed with a call in flight: the call is retried on a fresh sidecar.
    const turn2 = [user("q2"), assistant("a2")];
    const pending = s.engine.commitTurn({ sessionId: SID, sessionKey: KEY, advancementKey: "turn-2", messages: turn2 });
    setImmediate(() => s.sidecar.kill("SIGKILL"));
    const r = await pending;
    assert.ok(r.status === "committed" || r.status === "duplicate", r.status);
    assert.equal(markers(mirrorOf(home)).length, 2, "turn 2 is in the mirror once");
  });

  test("a call that gets no answer times out, and the wedged sidecar is replaced", async (t) => {
    const home = tempHome();
    const s = setup({ home, callTimeoutMs: 800 });
    t.after(async () => {
      await s.cleanup();
    });
    await s.engine.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
    const stuck = s.sidecar.pid;
    assert.ok(stuck);
    process.kill(stuck, "SIGSTOP");
    const start = Date.now();
    await assert.rejects(
      s.engine.commitTurn({ sessionId: SID, sessionKey: KEY, advancementKey: "t-1", messages: [user("q"), assistant("a")] }),
      (err) => err instanceof SidecarError && err.kind === "timeout" && /no answer within 800 ms/.test(err.message),
    );
    const waited = Date.now() - start;
    assert.ok(waited >= 700 && waited < 3000, `timed out after ${waited} ms`);
    assert.ok(await waitFor(() => !alive(stuck)), "the stuck child was killed");
    const r = await s.engine.commitTurn({ sessionId: SID, sessionKey: KEY, advancementKey: "t-1", messages: [user("q"), assistant("a")] });
    assert.equal(r.status, "committed");
    assert.notEqual(s.sidecar.pid, stuck);
  });

  test("an idle sidecar does not keep the host process alive, and exits with it", async () => {
    const home = tempHome();
    const script = `
      import { Sidecar } from ${JSON.stringify(pathToFileURL(join(PACKAGE_DIR, "../client/sidecar.js")).href)};
      import { Bridge, CtxhostContextEngine } from ${JSON.stringify(pathToFileURL(join(PACKAGE_DIR, "src/engine.js")).href)};
      import { createTiming } from ${JSON.stringify(pathToFileURL(join(PACKAGE_DIR, "../client/timing.js")).href)};
      const sidecar = new Sidecar({ binary: ${JSON.stringify(BINARY)}, home: ${JSON.stringify(home)}, callTimeoutMs: 10000 });
      const engine = new CtxhostContextEngine(new Bridge(sidecar, { info() {}, warn() {} }, createTiming(false)));
      await engine.bootstrap({ sessionId: "s", sessionKey: "agent:main:main", sessionFile: "x" });
      console.log(sidecar.pid);
      if (process.argv.includes("hang")) setInterval(() => {}, 1000);
    `;
    // 1. The host's event loop ends on its own although the sidecar still runs.
    const run = (/** @type {string[]} */ extra) => spawn(process.execPath, ["--input-type=module", "-e", script, "--", ...extra], { stdio: ["ignore", "pipe", "inherit"] });
    const host = run([]);
    let out = "";
    host.stdout.on("data", (d) => (out += d));
    const code = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("the host process did not exit: the idle sidecar keeps it alive")), 10_000);
      host.on("exit", (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    assert.equal(code, 0);
    const pid = Number(out.trim());
    assert.ok(pid > 0);
    assert.ok(await waitFor(() => !alive(pid), 5000), "the sidecar saw stdin close and exited");

    // 2. The host is killed outright: the sidecar still goes (EOF on its stdin).
    const hung = run(["hang"]);
    let out2 = "";
    hung.stdout.on("data", (d) => (out2 += d));
    assert.ok(await waitFor(() => out2.trim() !== "", 10_000));
    const pid2 = Number(out2.trim());
    assert.ok(alive(pid2));
    hung.kill("SIGKILL");
    assert.ok(await waitFor(() => !alive(pid2), 5000), "the sidecar exited after its host was killed");
  });
});
