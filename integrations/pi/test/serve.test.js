// The pi extension against a real `ctxhost serve`: its handlers fired the way pi fires them
// (test-support/harness.js stands in for pi's ExtensionAPI and session manager), checked against
// what pi would send the model, what it would write for a compaction, and ctxhost's mirror.
//
//   node --test integrations/pi/test/*.test.js     (CTXHOST_BIN overrides the binary)

import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import { fingerprint } from "../../client/fingerprint.js";
import {
  Branch,
  assistant,
  bigTurn,
  cleanup,
  endProcess,
  files,
  loadExtension,
  readJsonl,
  sidecars,
  skipServe,
  smallWindow,
  tempHome,
  toolResult,
  user,
  waitFor,
} from "../test-support/harness.js";

const SID = "0c2d9a61-pi-test";
const KEY = `pi:${SID}`;

/** The mirror of KEY under `home` (not a .reset-/.torn- copy). @param {string} home */
function mirrorOf(home) {
  const found = files(join(home, "sessions")).filter((f) => f.endsWith(".jsonl") && !f.endsWith(".ledger.jsonl") && f.includes(encodeURIComponent(KEY)));
  assert.equal(found.length, 1, `one mirror file: ${found.join(", ")}`);
  return found[0];
}
const mirrorMessages = (/** @type {string} */ home) =>
  readJsonl(mirrorOf(home))
    .filter((e) => e.type === "message")
    .map((e) => e.message);
const resets = (/** @type {string} */ home) => files(join(home, "sessions")).filter((f) => /\.(reset|torn)-/.test(f));
const isInserted = (/** @type {any} */ m) => m?.__ctxhost?.inserted === true;
/** The text of a message pi would send. @param {any} m */
const textOf = (m) =>
  typeof m?.content === "string" ? m.content : (m?.content ?? []).map((/** @type {any} */ c) => c.text ?? "").join("");

/**
 * Records the methods the extension's sidecar receives from now on.
 * @returns {() => string[]}
 */
function watchCalls() {
  /** @type {string[]} */
  const methods = [];
  for (const sidecar of sidecars()) {
    if (sidecar.__watched) continue;
    sidecar.__watched = true;
    const call = sidecar.call.bind(sidecar);
    sidecar.call = (/** @type {string} */ method, /** @type {any} */ params, /** @type {any} */ opts) => {
      /** @type {any} */ (sidecar).__methods?.push(method);
      return call(method, params, opts);
    };
  }
  for (const sidecar of sidecars()) sidecar.__methods = methods;
  return () => [...methods];
}

/**
 * A pi session with `turns` committed to its branch, the extension loaded and the session
 * started.
 */
async function started(t, { config = {}, turns = [], contextWindow } = /** @type {any} */ ({})) {
  const home = tempHome(config);
  t.after(() => cleanup(home));
  const branch = new Branch();
  for (const turn of turns) branch.append(...turn);
  const ext = loadExtension({ home, branch, contextWindow });
  await ext.emit("session_start", { reason: "startup" });
  return { home, branch, ext };
}

describe("the pi extension over ctxhost serve", { skip: skipServe(), concurrency: false }, () => {
  test("context: the assembled messages replace pi's; the mirror gets the branch, then only what is new", async (t) => {
    const { home, branch, ext } = await started(t, {
      config: { plugins: { slots: { contextEngine: "legacy" } } },
      turns: [[user("q1"), assistant("a1")]],
    });
    assert.deepEqual(ext.errors, []);
    // The prompt is in pi's list before it is in the session file.
    const prompt = user("q2");
    const list = [...branch.context(), prompt];
    const calls = watchCalls();
    const r = await ext.emit("context", { messages: list });
    assert.deepEqual(r.messages, list, "legacy passes pi's messages through");
    assert.deepEqual(calls(), ["session.sync", "session.assemble"]);
    assert.deepEqual(mirrorMessages(home), list, "the branch and the pending prompt, verbatim");

    // A tool round: pi's next call carries the reply with its tool call and the result.
    branch.append(prompt);
    const call = assistant("reading", [["call-1", "read", { path: "a.txt" }]]);
    const result = toolResult("call-1", "read", "contents of a.txt");
    const list2 = [...branch.context(), call, result];
    const before = calls().length;
    const r2 = await ext.emit("context", { messages: list2 });
    assert.deepEqual(r2.messages, list2);
    assert.deepEqual(calls().slice(before), ["session.sync", "session.assemble"], "one sync of the two new messages");
    assert.deepEqual(mirrorMessages(home), list2);

    // agent_end: the final reply reaches the mirror without waiting for the next prompt.
    const reply = assistant("done");
    await ext.emit("agent_end", { messages: [prompt, call, result, reply] });
    assert.deepEqual(mirrorMessages(home), [...list2, reply]);
    assert.deepEqual(resets(home), []);
    assert.deepEqual(ext.errors, []);
  });

  test("the recall tools are pi tools after session_start; ctx_search and ctx_expand reach compacted messages", async (t) => {
    const turns = [bigTurn("alpha"), bigTurn("beta"), bigTurn("gamma"), bigTurn("delta")];
    turns[0][0].content[0].text += " The vault combination is tangerine-otter.";
    const { branch, ext } = await started(t, { config: smallWindow("legacy", 4000), turns });
    assert.deepEqual(ext.tools.map((x) => x.name), ["ctx_search", "ctx_expand"]);
    const search = ext.tools[0];
    assert.equal(typeof search.parameters, "object");
    assert.match(search.promptSnippet, /^Search this conversation's full history/);
    assert.ok(search.promptGuidelines.some((/** @type {string} */ g) => g.startsWith("Use ctx_search")));

    const r = await ext.emit("context", { messages: [...branch.context(), user("what was the combination?")] });
    assert.ok(r.messages.some(isInserted), "ctxhost compacted in its 4000-token window");
    assert.ok(!JSON.stringify(r.messages).includes("tangerine"), "alpha is out of the context");

    const found = await search.execute("c1", { query: "tangerine otter", role: "user" }, undefined, undefined, ext.ctx);
    const hit = found.content[0].text.split("\n").find((/** @type {string} */ l) => / · compacted/.test(l));
    assert.ok(hit, found.content[0].text);
    const opened = await ext.tools[1].execute("c2", { id: /^- (\S+) · /.exec(hit)[1] }, undefined, undefined, ext.ctx);
    assert.ok(opened.content[0].text.includes("The vault combination is tangerine-otter."));
    // Errors are thrown, which pi turns into an error result for the model.
    await assert.rejects(search.execute("c3", { query: 5 }), /ctx_search: .*arguments\.query: invalid type/);
  });

  test("session_before_compact: ctxhost's summary and first kept entry become pi's compaction; pi's list afterwards is followed without a reset", async (t) => {
    const turns = [bigTurn("one"), bigTurn("two"), bigTurn("three"), bigTurn("four"), bigTurn("five")];
    const { home, branch, ext } = await started(t, { config: smallWindow("legacy", 100_000), turns, contextWindow: 100_000 });
    await ext.emit("context", { messages: branch.context() });
    await ext.emit("agent_end", { messages: turns.at(-1) });

    // pi's threshold: its window (100,000 here) less its reserve; ctxhost compacts for that.
    const settings = { enabled: true, reserveTokens: 96_000, keepRecentTokens: 1000 };
    const preparation = { firstKeptEntryId: branch.entries[6].id, tokensBefore: 12_345, messagesToSummarize: [], turnPrefixMessages: [], isSplitTurn: false, fileOps: {}, settings };
    const calls = watchCalls();
    const answer = await ext.emit("session_before_compact", { preparation, branchEntries: branch.entries, customInstructions: "keep five", signal: new AbortController().signal });
    assert.ok(answer?.compaction, JSON.stringify(answer));
    assert.deepEqual(calls(), ["session.compact", "session.assemble"], "in step: nothing to sync");
    const c = answer.compaction;
    assert.ok(c.summary.length > 50 && !c.summary.includes("<summary>"), "the summary alone, without ctxhost's wrapper");
    const kept = branch.entries.findIndex((e) => e.id === c.firstKeptEntryId);
    assert.ok(kept > 0, `the first kept entry is one of the branch's (${c.firstKeptEntryId})`);
    assert.equal(branch.entries[kept].type, "message");
    assert.ok(c.tokensBefore > 0 && c.tokensBefore !== 12_345, "ctxhost's own count");
    assert.equal(c.details.ctxhost.engine, "legacy");
    assert.equal(c.details.ctxhost.compacted, true);
    const mirrorCompactions = readJsonl(mirrorOf(home)).filter((e) => e.type === "compaction");
    assert.equal(mirrorCompactions.length, 1);
    assert.ok(mirrorCompactions[0].summary.includes(c.summary.slice(0, 40)));

    // pi writes the entry and rebuilds its list: summary first, then the kept messages.
    branch.compact(c);
    const prompt = user("six");
    const list = [...branch.context(), prompt];
    assert.equal(list[0].role, "compactionSummary");
    const r = await ext.emit("context", { messages: list });
    assert.deepEqual(calls().slice(2), ["session.sync", "session.assemble"], "only the prompt is new");
    const inserted = r.messages.filter(isInserted);
    assert.equal(inserted.length, 1, "ctxhost's summary, as ctxhost shows it");
    assert.ok(textOf(inserted[0]).includes(c.summary.slice(0, 40)));
    assert.ok(!r.messages.some((/** @type {any} */ m) => m.role === "compactionSummary"), "not pi's summary message as well");
    assert.deepEqual(r.messages.at(-1), prompt);
    assert.deepEqual(resets(home), []);
    assert.equal(mirrorMessages(home).length, 11, "ten messages and the prompt, each once");
  });

  test("pi starts its threshold compaction while agent_end still syncs: the two run one after the other", async (t) => {
    const turns = [bigTurn("one"), bigTurn("two"), bigTurn("three"), bigTurn("four"), bigTurn("five")];
    const { home, branch, ext } = await started(t, { config: smallWindow("legacy", 100_000), turns: turns.slice(0, 4), contextWindow: 100_000 });
    await ext.emit("context", { messages: [...branch.context(), turns[4][0]] });
    branch.append(...turns[4]);
    /** @type {string[]} */
    const stderr = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = (/** @type {any} */ chunk) => (stderr.push(String(chunk)), true);
    let answer;
    try {
      // Not awaited one by one: pi does not wait for agent_end handlers before compacting.
      [, answer] = await Promise.all([
        ext.emit("agent_end", { messages: turns[4] }),
        ext.emit("session_before_compact", { preparation: { firstKeptEntryId: branch.entries[2].id, tokensBefore: 1, settings: { reserveTokens: 96_000 } }, branchEntries: branch.entries }),
      ]);
    } finally {
      process.stderr.write = write;
    }
    assert.ok(answer?.compaction, `${JSON.stringify(answer)}\n${stderr.join("")}`);
    assert.ok(!stderr.join("").includes("failed"), stderr.join(""));
    assert.equal(mirrorMessages(home).length, 10);
  });

  test("pi asks twice for the same history (its checks after a prompt and before the next): ctxhost compacts once", async (t) => {
    const turns = [bigTurn("one"), bigTurn("two"), bigTurn("three"), bigTurn("four"), bigTurn("five")];
    const { home, branch, ext } = await started(t, { config: smallWindow("legacy", 100_000), turns, contextWindow: 100_000 });
    await ext.emit("context", { messages: branch.context() });
    const request = () => ({ preparation: { firstKeptEntryId: branch.entries[2].id, tokensBefore: 1, settings: { reserveTokens: 96_000 } }, branchEntries: branch.entries });
    const first = await ext.emit("session_before_compact", request());
    const second = await ext.emit("session_before_compact", request());
    assert.ok(first?.compaction);
    assert.deepEqual(second, first, "the same answer: pi may have aborted the first");
    assert.equal(readJsonl(mirrorOf(home)).filter((e) => e.type === "compaction").length, 1, "one compaction in the mirror");
    branch.compact(second.compaction);
    assert.deepEqual(await ext.emit("session_before_compact", request()), { cancel: true }, "pi holds it already");
    // A new message, but nothing more the engine can compact: not its old summary a second time.
    branch.append(user("seven"));
    assert.deepEqual(await ext.emit("session_before_compact", request()), { cancel: true });
    const aborted = new AbortController();
    aborted.abort();
    branch.append(...bigTurn("six"));
    assert.deepEqual(await ext.emit("session_before_compact", { ...request(), signal: aborted.signal }), { cancel: true }, "aborted by pi: not run");
    assert.equal(readJsonl(mirrorOf(home)).filter((e) => e.type === "compaction").length, 1);
  });

  test("an engine with nothing to compact: pi's compaction is cancelled with a warning naming why; pi's summarizer is not called", async (t) => {
    const { branch, ext } = await started(t, { turns: [[user("q1"), assistant("a1")]] });
    /** @type {string[]} */
    const stderr = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = (/** @type {any} */ chunk) => (stderr.push(String(chunk)), true);
    let answer;
    try {
      answer = await ext.emit("session_before_compact", { preparation: { firstKeptEntryId: branch.entries[0].id, tokensBefore: 9, settings: { reserveTokens: 16_384 } }, branchEntries: branch.entries });
    } finally {
      process.stderr.write = write;
    }
    assert.deepEqual(answer, { cancel: true });
    assert.match(stderr.join(""), /ctxhost: the engine has no compaction of pi:0c2d9a61-pi-test to offer \(nothing to compact\); pi's compaction is cancelled/);
  });

  test("a new pi process (--continue) follows the mirror from the branch: no reset, the compaction stays", async (t) => {
    const turns = [bigTurn("one"), bigTurn("two"), bigTurn("three"), bigTurn("four")];
    const home = tempHome(smallWindow("legacy", 100_000));
    t.after(() => cleanup(home));
    const branch = new Branch();
    for (const turn of turns) branch.append(...turn);
    let ext = loadExtension({ home, branch });
    await ext.emit("session_start", { reason: "startup" });
    await ext.emit("context", { messages: branch.context() });
    const answer = await ext.emit("session_before_compact", {
      preparation: { firstKeptEntryId: branch.entries[4].id, tokensBefore: 1, settings: { reserveTokens: 97_000 } },
      branchEntries: branch.entries,
    });
    branch.compact(answer.compaction);
    // The process ends: its sidecar with it.
    await endProcess(home);

    ext = loadExtension({ home, branch });
    await ext.emit("session_start", { reason: "startup" });
    const prompt = user("after the restart");
    const r = await ext.emit("context", { messages: [...branch.context(), prompt] });
    assert.ok(r.messages.some(isInserted), "the compaction from the previous process is in the assembly");
    assert.deepEqual(r.messages.at(-1), prompt);
    assert.deepEqual(resets(home), []);
    assert.equal(mirrorMessages(home).length, 9);
    assert.deepEqual(ext.errors, []);
  });

  test("another branch (pi /tree, a fork): the mirror is reset to the branch pi is on, the old file kept", async (t) => {
    const { home, branch, ext } = await started(t, { turns: [[user("q1"), assistant("a1")], [user("q2"), assistant("a2")]] });
    await ext.emit("context", { messages: [...branch.context(), user("q3")] });
    // pi moves to another branch that forks after the first turn.
    const other = new Branch();
    other.entries = branch.entries.slice(0, 2);
    other.append(user("q2 again, differently"), assistant("a2'"));
    ext.ctx.sessionManager.getBranch = () => other.entries;
    const prompt = user("q3'");
    const list = [...other.context(), prompt];
    const r = await ext.emit("context", { messages: list });
    assert.deepEqual(r.messages, list);
    assert.deepEqual(mirrorMessages(home), list);
    assert.equal(resets(home).length, 1, "the previous mirror is kept whole");
  });

  test("checkpoint-manager's gauge is a note among the messages; the provider request's system prompt is left alone", async (t) => {
    const { branch, ext } = await started(t, { config: smallWindow("checkpoint-manager", 4000), turns: [bigTurn("alpha"), bigTurn("beta"), bigTurn("gamma")] });
    const r = await ext.emit("context", { messages: [...branch.context(), user("next")] });
    assert.ok(r.messages.some((m) => /\[Context: \d+% \| /.test(JSON.stringify(m.content))), "the gauge note is in the context");
    const payload = { model: "fake-model", messages: [{ role: "system", content: "You are pi." }, { role: "user", content: "next" }], stream: true };
    assert.equal(await ext.emit("before_provider_request", { payload }), undefined, "no system-prompt addition: the cached prefix stays");
    assert.equal(payload.messages[0].content, "You are pi.", "pi's payload object is not changed");
  });

  test("a killed sidecar: the next call restarts it and the context is assembled; the mirror holds each message once", async (t) => {
    const { home, branch, ext } = await started(t, { turns: [[user("q1"), assistant("a1")]] });
    const q2 = user("q2");
    await ext.emit("context", { messages: [...branch.context(), q2] });
    const [sidecar] = sidecars().filter((s) => s.running);
    const pid = sidecar.pid;
    sidecar.kill("SIGKILL");
    assert.ok(await waitFor(() => !sidecar.running));
    const list = [...branch.context(), q2, assistant("a2"), user("q3")];
    const r = await ext.emit("context", { messages: list });
    assert.deepEqual(r.messages, list);
    assert.notEqual(sidecar.pid, pid);
    assert.deepEqual(mirrorMessages(home).map(fingerprint), list.map(fingerprint));
  });
});
