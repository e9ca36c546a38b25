// The mirror helpers both integrations share: an assemble plan back into messages, the summary
// text a runtime stores as its own compaction, and syncs in bounded requests.
//
//   node --test integrations/client/test/*.test.js

import assert from "node:assert/strict";
import test from "node:test";
import { chain, chainOf, fingerprint } from "../fingerprint.js";
import { fromItems, summaryText, syncMirror } from "../mirror.js";

const history = ["a", "b", "c", "d"].map((t, i) => ({ role: i % 2 ? "assistant" : "user", content: t, timestamp: 1000 + i }));

test("fromItems: positions and runs are the client's own objects; inserted messages as sent", () => {
  const summary = { role: "user", content: "summary", __ctxhost: { inserted: true, kind: "compactionSummary" } };
  const pruned = { role: "toolResult", content: "[pruned]" };
  const out = fromItems(history, [{ message: summary }, { from: 1, to: 2 }, { message: pruned, replaces: 3 }, { index: 0 }]);
  assert.deepEqual(out, [summary, history[1], history[2], pruned, history[0]]);
  assert.equal(out[1], history[1], "the same object, not a copy");
});

test("fromItems: a plan that does not fit the history names the item and why", () => {
  assert.throws(() => fromItems(history, [{ index: 4 }]), /^Error: items\[0\] refers to message 4 of 4$/);
  assert.throws(() => fromItems(history, [{ index: 0 }, { from: 2, to: 1 }]), /items\[1\] is a run from 2 back to 1/);
  assert.throws(() => fromItems(history, [{ index: 1.5 }]), /items\[0\] refers to message 1.5 of 4/);
  assert.throws(() => fromItems(history, [{ nothing: true }]), /items\[0\] is none of \{index\}, \{from, to\} or \{message\}/);
});

test("summaryText: the summary without ctxhost's wrapper; other shapes as they are", () => {
  const wrapped = {
    role: "user",
    content: [{ type: "text", text: "The earlier part of this conversation was compacted. Summary of it:\n\n<summary>\n## Goal\n- ship it\n</summary>" }],
  };
  assert.equal(summaryText(wrapped), "## Goal\n- ship it");
  assert.equal(summaryText({ role: "user", content: "  plain text  " }), "plain text");
  assert.equal(summaryText({ role: "compactionSummary", summary: "<summary>s</summary>" }), "s");
  assert.equal(summaryText({ role: "user" }), "");
});

test("syncMirror: the tail from `from`, in requests under half the line cap, each with its last fingerprint", async () => {
  // ~330 bytes each: two fit a request under half of a 1,400-byte line.
  const big = Array.from({ length: 6 }, (_, i) => ({ role: "user", content: String(i).repeat(300) }));
  /** @type {any[]} */
  const sent = [];
  const requests = await syncMirror(async (method, params) => sent.push({ method, ...params }), {
    sessionKey: "k",
    messages: big,
    from: 1,
    maxLineBytes: 1400,
  });
  assert.equal(requests, 3);
  assert.deepEqual(
    sent.map((r) => [r.method, r.from, r.messages.length, r.reset]),
    [
      ["session.sync", 1, 2, undefined],
      ["session.sync", 3, 2, undefined],
      ["session.sync", 5, 1, undefined],
    ],
  );
  assert.equal(sent[0].lastFingerprint, fingerprint(big[2]));
  assert.equal(sent[2].lastFingerprint, fingerprint(big[5]));
  assert.deepEqual(sent[0].fingerprints, [fingerprint(big[1]), fingerprint(big[2])]);
  assert.deepEqual(sent[2].fingerprints, [fingerprint(big[5])]);
});

test("chain: the server's vector, and a middle rewritten changes the chain but not the last fingerprint", () => {
  // The same vector as the server's test (serve/src/sync.rs) and Hermes' (tests/test_messages.py).
  const first = chain(undefined, "0123456789abcdef");
  assert.equal(first, "9f9f5111f7b27a78");
  assert.equal(chain(first, "fedcba9876543210"), "6b2e2b6c22881712");
  const rewritten = history.map((m, i) => (i === 1 ? { ...m, content: "rewritten" } : m));
  const of = (/** @type {any[]} */ messages) => (/** @type {number} */ i) => fingerprint(messages[i]);
  assert.equal(fingerprint(rewritten.at(-1)), fingerprint(history.at(-1)));
  assert.notEqual(chainOf(4, of(rewritten)), chainOf(4, of(history)));
  assert.equal(chainOf(1, of(rewritten)), chainOf(1, of(history)));
  assert.equal(chainOf(0, of(history)), undefined);
  // Extended a message at a time, the same chain as computed whole.
  const chains = /** @type {string[]} */ ([]);
  chainOf(2, of(history), chains);
  assert.equal(chainOf(4, of(history), chains), chainOf(4, of(history)));
});

test("syncMirror: a reset starts at 0 and is sent even for an empty history", async () => {
  /** @type {any[]} */
  const sent = [];
  await syncMirror(async (_m, params) => sent.push(params), { sessionKey: "k", messages: [], from: 0, reset: true });
  assert.deepEqual(sent, [{ sessionKey: "k", from: 0, messages: [], reset: true }]);
  sent.length = 0;
  await syncMirror(async (_m, params) => sent.push(params), { sessionKey: "k", messages: history, from: 0, reset: true });
  assert.equal(sent.length, 1);
  assert.equal(sent[0].reset, true);
  assert.equal(sent[0].messages.length, 4);
  assert.equal(await syncMirror(async () => assert.fail("nothing to send"), { sessionKey: "k", messages: history, from: 4 }), 0);
});
