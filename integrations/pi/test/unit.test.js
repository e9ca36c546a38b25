// Tests that need no ctxhost binary: the package pi loads, the branch as a history, the system
// prompt addition in each provider's request, the tools' registration, and what a missing or
// broken sidecar leaves pi to do (its own messages, its own compaction).
//
//   node --test integrations/pi/test/*.test.js

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import test from "node:test";
import { branchHistory } from "../src/branch.js";
import { OVERFLOW_SHARE, compactionBudget, mayReuseCompaction } from "../src/compaction.js";
import { withSystemAddition } from "../src/payload.js";
import { piTool, registerTools, snippetOf } from "../src/tools.js";
import { Branch, PACKAGE_DIR, assistant, cleanup, loadExtension, tempHome, user } from "../test-support/harness.js";

test("package.json: a publishable ESM pi package, its binary an optional platform package", () => {
  const pkg = JSON.parse(readFileSync(join(PACKAGE_DIR, "package.json"), "utf8"));
  assert.equal(pkg.type, "module");
  assert.deepEqual(pkg.pi.extensions, ["./index.js"]);
  assert.ok(pkg.keywords.includes("pi-package"));
  assert.equal(pkg.private, undefined);
  assert.deepEqual(pkg.dependencies ?? {}, {});
  assert.deepEqual(pkg.optionalDependencies, { "@ctxhost/cli-linux-x64": pkg.version });
  assert.ok(pkg.files.includes("client/*.js"), "the shared client ships inside the package");
});

test("the extension registers its flags and handlers and starts nothing while loading", () => {
  const home = tempHome();
  const ext = loadExtension({ home, binary: "/nonexistent/ctxhost", branch: new Branch() });
  assert.deepEqual([...ext.flags.keys()], ["ctxhost-bin", "ctxhost-home"]);
  assert.deepEqual(
    [...ext.handlers.keys()].sort(),
    ["agent_end", "before_provider_request", "context", "session_before_compact", "session_shutdown", "session_start"],
  );
  assert.deepEqual(ext.tools, [], "tools come from the server, once a session opens");
});

test("branchHistory: messages, custom messages and branch summaries in order, each with its entry id; compactions and the rest skipped", () => {
  const a = user("a");
  const entries = [
    { type: "session", id: "s0", version: 3 },
    { type: "message", id: "e1", parentId: null, timestamp: "2026-11-20T09:00:00.000Z", message: a },
    { type: "model_change", id: "e2", parentId: "e1", provider: "fake", modelId: "m" },
    { type: "custom_message", id: "e3", parentId: "e2", timestamp: "2026-11-20T09:00:01.000Z", customType: "note", content: "hello", display: true },
    { type: "compaction", id: "e4", parentId: "e3", summary: "s", firstKeptEntryId: "e1", tokensBefore: 5 },
    { type: "branch_summary", id: "e5", parentId: "e4", timestamp: "2026-11-20T09:00:02.000Z", summary: "left branch", fromId: "e1" },
    { type: "branch_summary", id: "e6", parentId: "e5", timestamp: "2026-11-20T09:00:03.000Z", summary: "" },
  ];
  const h = branchHistory(entries);
  assert.deepEqual(h.entryIds, ["e1", "e3", "e5"]);
  assert.equal(h.messages[0], a, "a message entry's own object");
  // The shapes pi builds its context with (dist/core/messages.js), so fingerprints agree.
  assert.equal(
    JSON.stringify(h.messages[1]),
    JSON.stringify({ role: "custom", customType: "note", content: "hello", display: true, details: undefined, timestamp: Date.parse("2026-11-20T09:00:01.000Z") }),
  );
  assert.deepEqual(h.messages[2], { role: "branchSummary", summary: "left branch", fromId: "e1", timestamp: Date.parse("2026-11-20T09:00:02.000Z") });
  assert.deepEqual(branchHistory([]), { messages: [], entryIds: [] });
});

test("withSystemAddition: at the end of the system prompt of each provider's request shape, never in place", () => {
  const add = "[Context: 74% | 148k/200k tokens]";
  const chat = { model: "m", messages: [{ role: "system", content: "sys" }, { role: "user", content: "hi" }] };
  const out = withSystemAddition(chat, add);
  assert.equal(out.messages[0].content, `sys\n\n${add}`);
  assert.equal(out.messages[1], chat.messages[1]);
  assert.equal(chat.messages[0].content, "sys", "not mutated");
  assert.equal(withSystemAddition({ messages: [{ role: "developer", content: "d" }] }, add).messages[0].content, `d\n\n${add}`);
  assert.deepEqual(withSystemAddition({ input: [{ role: "system", content: [{ type: "input_text", text: "r" }] }] }, add).input[0].content, [
    { type: "input_text", text: "r" },
    { type: "input_text", text: add },
  ]);
  assert.deepEqual(withSystemAddition({ system: [{ type: "text", text: "a", cache_control: { type: "ephemeral" } }] }, add).system, [
    { type: "text", text: "a", cache_control: { type: "ephemeral" } },
    { type: "text", text: add },
  ]);
  assert.equal(withSystemAddition({ config: { systemInstruction: "g" } }, add).config.systemInstruction, `g\n\n${add}`);
  assert.equal(withSystemAddition({ messages: [{ role: "user", content: "no system" }] }, add), null);
  assert.equal(withSystemAddition({ messages: [] }, ""), null);
});

test("tools: the snippet is the description's first sentence; an engine tool may not replace one of pi's", () => {
  assert.equal(snippetOf("Search this conversation. Returns ids."), "Search this conversation.");
  assert.equal(snippetOf("No full stop"), "No full stop");
  /** @type {any[]} */
  const registeredTools = [];
  const pi = { registerTool: (/** @type {any} */ t) => registeredTools.push(t), getAllTools: () => [{ name: "read" }, ...registeredTools] };
  const warnings = [];
  const registered = new Set();
  const tools = [
    { name: "ctx_search", description: "Search. More.", parameters: { type: "object" }, source: "host" },
    { name: "read", description: "An engine's read.", parameters: { type: "object" }, source: "engine" },
    { name: "lossless_describe", description: "Describe a summary.", parameters: { type: "object" }, source: "engine" },
  ];
  const added = registerTools(pi, /** @type {any} */ (tools), registered, () => null, (m) => warnings.push(m));
  assert.deepEqual(added, ["ctx_search", "lossless_describe"]);
  assert.match(warnings[0], /engine's tool read is not registered: pi already has a tool of that name/);
  assert.equal(registeredTools[1].label, "lossless_describe (ctxhost engine)");
  assert.deepEqual(registerTools(pi, /** @type {any} */ (tools), registered, () => null, () => {}), [], "registered once");
});

test("a tool call without a session throws, which pi reports to the model as an error result", async () => {
  const tool = piTool({ name: "ctx_search", description: "d", parameters: {} }, () => null);
  await assert.rejects(tool.execute("c", { query: "x" }), /ctx_search cannot run: no pi session is open/);
});

test("a missing binary: context passes pi's messages through, compaction is left to pi, each with one warning; tools fail as error results", async (t) => {
  const home = tempHome();
  t.after(() => cleanup(home));
  const branch = new Branch().append(user("q1"), assistant("a1"));
  const ext = loadExtension({ home, binary: "/nonexistent/ctxhost-bin", branch });
  /** @type {string[]} */
  const stderr = [];
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = (/** @type {any} */ chunk) => (stderr.push(String(chunk)), true);
  try {
    await ext.emit("session_start", { reason: "startup" });
    const list = [...branch.context(), user("q2")];
    assert.equal(await ext.emit("context", { messages: list }), undefined, "pi sends its own list");
    assert.equal(await ext.emit("context", { messages: list }), undefined);
    assert.equal(await ext.emit("before_provider_request", { payload: { messages: [] } }), undefined);
    assert.equal(
      await ext.emit("session_before_compact", { preparation: { firstKeptEntryId: branch.entries[1].id, tokensBefore: 9 }, branchEntries: branch.entries }),
      undefined,
      "pi compacts by itself",
    );
    await ext.emit("agent_end", { messages: [] });
  } finally {
    process.stderr.write = write;
  }
  const text = stderr.join("");
  assert.match(text, /ctxhost: cannot open pi:0c2d9a61-pi-test on the sidecar \(.*ENOENT.*\); pi uses its own context until ctxhost answers/);
  assert.match(text, /assembling the context of pi:0c2d9a61-pi-test failed \(.*\); pi sends its own messages this time/);
  assert.match(text, /compacting pi:0c2d9a61-pi-test through ctxhost failed \(.*\); pi compacts with its own summarizer/);
  assert.equal(text.split("pi sends its own messages this time").length - 1, 1, "the same warning is said once");
  assert.deepEqual(ext.errors, [], "no handler threw into pi");
  assert.deepEqual(ext.tools, []);
});

test("pi's reason for a compaction sets the budget ctxhost compacts for", () => {
  assert.equal(compactionBudget(8000, 2500, "threshold"), 5500, "the window less pi's reserve");
  assert.equal(compactionBudget(8000, 2500, "manual"), 5500, "manual: forced, the same budget");
  assert.equal(compactionBudget(8000, 2500, undefined), 5500, "pi 0.73 says no reason");
  assert.equal(compactionBudget(8000, 2500, "overflow"), Math.floor(5500 * OVERFLOW_SHARE), "overflow: a margin under it");
  assert.equal(compactionBudget(8000, 9000, "threshold"), 8000, "a reserve past the window is ignored");
  assert.equal(compactionBudget(undefined, 2500, "overflow"), undefined);
  assert.equal(compactionBudget(128_000, 16_384, "manual", 3000), 3000, "never past ctxhost's window");
  assert.equal(compactionBudget(8000, 2500, "threshold", 100_000), 5500, "pi's budget when it is the narrower");
  assert.equal(mayReuseCompaction("threshold"), true);
  assert.equal(mayReuseCompaction("overflow"), false, "the last answer is what did not fit");
});
