// onSubagentEnded must reach the parent's engine when the server no longer knows which session
// spawned the child. The server keeps that link in memory only: a restart of the sidecar and a
// `session.close` of the parent (OpenClaw disposes the engine after every turn) both drop it,
// and its unknown-child error then carries only `{ childSessionKey }` in `data`.
//
// These run against the real `ctxhost serve`: both states are reachable through the real path
// (kill the child process; dispose the parent's engine), so no fake sidecar is needed.
//
//   node --test integrations/openclaw/test/*.test.js     (CTXHOST_BIN overrides the binary)

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Bridge, CtxhostContextEngine } from "../src/engine.js";
import { RpcError } from "../../client/sidecar.js";
import { createTiming } from "../../client/timing.js";
import { assistant, setup, skipServe, tempHome, user, waitFor } from "../test-support/harness.js";

const PARENT = "agent:main:parent";
const CHILD = "agent:main:subagent:child-7";
const SID = "4a2c-parent";

/**
 * A parent session with one committed turn and one prepared subagent, over a real sidecar that
 * records every call with its params.
 */
async function parentWithChild(t) {
  const home = tempHome({ plugins: { slots: { contextEngine: "legacy" } } });
  const s = setup({ home });
  t.after(s.cleanup);
  /** @type {{ method: string, params: any, ok: boolean, code?: number, data?: any }[]} */
  const sent = [];
  const call = s.sidecar.call.bind(s.sidecar);
  s.sidecar.call = async (method, params = {}, opts) => {
    try {
      const r = await call(method, params, opts);
      sent.push({ method, params, ok: true });
      return r;
    } catch (err) {
      sent.push({ method, params, ok: false, code: err instanceof RpcError ? err.code : undefined, data: err?.data });
      throw err;
    }
  };
  await s.engine.bootstrap({ sessionId: SID, sessionKey: PARENT, sessionFile: PARENT });
  await s.engine.commitTurn({ sessionId: SID, sessionKey: PARENT, advancementKey: "t1", messages: [user("spawn a helper"), assistant("spawning")] });
  await s.engine.prepareSubagentSpawn({ parentSessionKey: PARENT, childSessionKey: CHILD, contextMode: "isolated" });
  return { s, sent };
}

const warnings = (/** @type {string[]} */ logs) => logs.filter((l) => l.startsWith("warn: ctxhost: subagent end"));

describe("onSubagentEnded when the server forgot the child's parent", { skip: skipServe(), concurrency: false }, () => {
  test("after a sidecar restart the end reaches the parent (bootstrapped again), not a warning", async (t) => {
    const { s, sent } = await parentWithChild(t);
    const first = s.sidecar.pid;
    s.sidecar.kill("SIGKILL");
    assert.ok(await waitFor(() => !s.sidecar.running), "the exit was noticed");
    sent.length = 0;

    await s.engine.onSubagentEnded({ childSessionKey: CHILD, reason: "completed" });

    assert.notEqual(s.sidecar.pid, first, "a new sidecar answered");
    assert.deepEqual(warnings(s.logs), [], s.logs.join("\n"));
    const ended = sent.filter((c) => c.method === "subagent.ended");
    assert.ok(ended.length >= 1, JSON.stringify(sent));
    const last = ended.at(-1);
    assert.equal(last.ok, true, `the last subagent.ended succeeded: ${JSON.stringify(sent)}`);
    assert.equal(last.params.sessionKey, PARENT, "it named the parent");
    assert.equal(last.params.childSessionKey, CHILD);
    assert.ok(sent.some((c) => c.method === "session.bootstrap" && c.params.sessionKey === PARENT && c.ok), "the parent was opened again");
  });

  test("after the parent's engine was disposed (session closed) the end still reaches the parent", async (t) => {
    const { s, sent } = await parentWithChild(t);
    await s.engine.dispose();
    assert.ok(sent.some((c) => c.method === "session.close" && c.params.sessionKey === PARENT));
    // What the server answers a child whose parent it no longer has open: only the child's key.
    await assert.rejects(s.sidecar.call("subagent.ended", { childSessionKey: CHILD, reason: "completed" }), (err) => {
      assert.ok(err instanceof RpcError);
      assert.equal(err.code, -32001);
      assert.deepEqual(err.data, { childSessionKey: CHILD });
      return true;
    });
    sent.length = 0;

    const later = s.another();
    await later.onSubagentEnded({ childSessionKey: CHILD, reason: "deleted" });
    assert.deepEqual(warnings(s.logs), [], s.logs.join("\n"));
    const ended = sent.filter((c) => c.method === "subagent.ended");
    assert.equal(ended.at(-1)?.ok, true, JSON.stringify(sent));
    assert.equal(ended.at(-1)?.params.sessionKey, PARENT);
    await later.dispose();
  });

  test("a child whose spawn this process never prepared: one warning naming the child and why", async (t) => {
    const { s, sent } = await parentWithChild(t);
    sent.length = 0;
    const stranger = "agent:main:subagent:not-mine";
    await s.engine.onSubagentEnded({ childSessionKey: stranger, reason: "swept" });
    assert.deepEqual(
      sent.map((c) => [c.method, c.ok, c.params.sessionKey]),
      [["subagent.ended", false, undefined]],
      "no parent to name, so no retry",
    );
    const w = warnings(s.logs);
    assert.equal(w.length, 1, s.logs.join("\n"));
    assert.match(w[0], /subagent end of agent:main:subagent:not-mine not delivered/);
    assert.match(w[0], /its spawn was not prepared in this process/);
  });

  test("an ended child is forgotten: a second end no longer names the old parent", async (t) => {
    const { s, sent } = await parentWithChild(t);
    await s.engine.onSubagentEnded({ childSessionKey: CHILD, reason: "completed" });
    assert.equal(s.bridge.parents.has(CHILD), false);
    sent.length = 0;
    await s.engine.onSubagentEnded({ childSessionKey: CHILD, reason: "completed" });
    const ended = sent.filter((c) => c.method === "subagent.ended");
    assert.equal(ended.length, 1, JSON.stringify(sent));
    assert.equal(ended[0].params.sessionKey, undefined);
  });
});

// legacy issues no rollback handle, so the rollback path needs a sidecar that issues one: a fake
// that answers the three subagent methods and records them.
test("a rolled-back spawn is forgotten: its child's end is left to the server (fake sidecar)", async () => {
  /** @type {[string, any][]} */
  const sent = [];
  const fake = {
    generation: 1,
    running: true,
    initialized: null,
    async call(/** @type {string} */ method, /** @type {any} */ params) {
      sent.push([method, params]);
      if (method === "subagent.prepareSpawn") return { rollbackHandle: 5 };
      return {};
    },
  };
  const logs = [];
  const log = { info: (m) => logs.push(m), warn: (m) => logs.push(m) };
  const engine = new CtxhostContextEngine(new Bridge(/** @type {any} */ (fake), log, createTiming(false)));
  const prep = await engine.prepareSubagentSpawn({ parentSessionKey: PARENT, childSessionKey: CHILD });
  assert.ok(prep, "a handle was issued");
  await prep.rollback();
  await engine.onSubagentEnded({ childSessionKey: CHILD, reason: "released" });
  assert.deepEqual(sent, [
    ["subagent.prepareSpawn", { sessionKey: PARENT, childSessionKey: CHILD }],
    ["subagent.rollback", { sessionKey: PARENT, rollbackHandle: 5 }],
    ["subagent.ended", { childSessionKey: CHILD, reason: "released" }],
  ]);
  assert.deepEqual(logs, []);
});
