// Tests that need no ctxhost binary: the package metadata OpenClaw reads, registration, config
// resolution, fingerprints and the client-side budget trim.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import plugin from "../index.js";
import { resolveConfig } from "../../client/config.js";
import { isInserted, withTimestamps } from "../../client/mirror.js";
import { fingerprint, lastFingerprint } from "../../client/fingerprint.js";
import { estimateTokens, fitToBudget, units } from "../src/tokens.js";
import { PACKAGE_DIR, assistant, toolResult, user } from "../test-support/harness.js";

const json = (/** @type {string} */ name) => JSON.parse(readFileSync(join(PACKAGE_DIR, name), "utf8"));

test("package.json declares the entry, ESM and a pinned plugin API range", () => {
  const pkg = json("package.json");
  assert.equal(pkg.type, "module");
  assert.deepEqual(pkg.openclaw.extensions, ["./index.js"]);
  assert.equal(pkg.openclaw.compat.pluginApi, ">=2026.9.6 <2026.10.0");
  assert.deepEqual(pkg.dependencies ?? {}, {}, "no runtime dependencies");
  assert.equal(pkg.private, undefined, "publishable");
  assert.deepEqual(pkg.optionalDependencies, { "@ctxhost/cli-linux-x64": pkg.version }, "the binary, esbuild's way");
  assert.ok(pkg.files.includes("client/*.js"), "the shared client ships inside the package");
});

test("openclaw.plugin.json: id is the engine id, kind, and a config schema with defaults", () => {
  const manifest = json("openclaw.plugin.json");
  assert.equal(manifest.id, "ctxhost");
  assert.equal(manifest.kind, "context-engine");
  const props = manifest.configSchema.properties;
  assert.deepEqual(Object.keys(props).sort(), ["binary", "callTimeoutMs", "home"]);
  // No default binary: unset, the plugin runs its platform package's binary (client/config.js).
  assert.equal(props.binary.default, undefined);
  assert.match(props.binary.description, /@ctxhost\/cli-<platform> package/);
  assert.equal(props.callTimeoutMs.default, 30000);
  assert.equal(manifest.configSchema.additionalProperties, false);
});

test("register() only registers a factory, however often it runs; the engine declares the durable-turn semantics", async () => {
  /** @type {[string, Function][]} */
  const registered = [];
  const api = {
    pluginConfig: { binary: "/nonexistent/ctxhost", home: "/tmp/nowhere" },
    logger: { info() {}, warn() {}, error() {} },
    registerContextEngine: (/** @type {string} */ id, /** @type {Function} */ factory) => registered.push([id, factory]),
  };
  for (let i = 0; i < 3; i++) plugin.register(api);
  assert.equal(plugin.id, "ctxhost");
  assert.equal(registered.length, 3);
  assert.ok(registered.every(([id]) => id === "ctxhost"));
  const engine = await registered[0][1]({});
  assert.equal(engine.info.id, "ctxhost");
  assert.equal(engine.info.ownsCompaction, true);
  assert.deepEqual(engine.info.transcriptSemantics, {
    currentTurnFence: "before-current-turn-entry-v1",
    turnAdvancementIdempotency: "atomic-idempotent-v1",
  });
  for (const hook of ["bootstrap", "maintain", "ingest", "ingestBatch", "afterTurn", "commitTurn", "assemble", "compact", "prepareSubagentSpawn", "onSubagentEnded", "dispose"]) {
    assert.equal(typeof engine[hook], "function", hook);
  }
  // Nothing was spawned: the binary does not even exist, and no hook ran.
  assert.deepEqual(await engine.maintain({}), { changed: false, bytesFreed: 0, rewrittenEntries: 0 });
  assert.deepEqual(await engine.ingest({}), { ingested: false });
  assert.deepEqual(await engine.ingestBatch({}), { ingestedCount: 0 });
  await engine.dispose();
});

test("a missing binary fails the hooks softly: bootstrap says why, assemble passes the history through", async () => {
  /** @type {Function[]} */
  const factories = [];
  const warnings = [];
  plugin.register({
    pluginConfig: { binary: "/nonexistent/ctxhost-bin", callTimeoutMs: 2000 },
    logger: { info() {}, warn: (/** @type {string} */ m) => warnings.push(m) },
    registerContextEngine: (/** @type {string} */ _id, /** @type {Function} */ f) => factories.push(f),
  });
  const engine = await factories[0]({});
  const boot = await engine.bootstrap({ sessionId: "s", sessionKey: "agent:main:x", sessionFile: "agent:main:x" });
  assert.equal(boot.bootstrapped, false);
  assert.match(boot.reason, /could not run/);
  const history = [user("hi"), assistant("hello")];
  const out = await engine.assemble({ sessionId: "s", sessionKey: "agent:main:x", messages: history, tokenBudget: 10_000 });
  assert.deepEqual(out.messages, history);
  assert.ok(warnings.some((w) => /passing the history through/.test(w)), warnings.join("\n"));
  await assert.rejects(engine.commitTurn({ sessionId: "s", sessionKey: "agent:main:x", advancementKey: "a", messages: history }));
});

test("config: home from the plugin config wins over CTXHOST_HOME, which wins over ~/.ctxhost", () => {
  assert.deepEqual(resolveConfig({ home: "/srv/ctx", binary: "/opt/ctxhost", callTimeoutMs: 500 }, { CTXHOST_HOME: "/env/home" }), {
    binary: "/opt/ctxhost",
    home: "/srv/ctx",
    callTimeoutMs: 500,
  });
  assert.equal(resolveConfig({}, { CTXHOST_HOME: "/env/home" }).home, "/env/home");
  assert.equal(resolveConfig(undefined, {}).home, join(homedir(), ".ctxhost"));
  assert.equal(resolveConfig({ home: "~/x" }, {}).home, join(homedir(), "x"));
  assert.equal(resolveConfig({}, {}, () => undefined).binary, "ctxhost", "a bare name is left to PATH");
  assert.equal(resolveConfig({}, {}).callTimeoutMs, 30000);
  assert.equal(resolveConfig({ callTimeoutMs: -1 }, {}).callTimeoutMs, 30000);
});

test("fingerprint: 16 hex digits of sha256 over JSON.stringify, field order included", () => {
  const m = user("hello");
  assert.match(fingerprint(m), /^[0-9a-f]{16}$/);
  assert.equal(fingerprint(m), fingerprint(JSON.parse(JSON.stringify(m))));
  assert.notEqual(fingerprint(m), fingerprint({ ...m, content: "hello!" }));
  assert.equal(lastFingerprint([]), undefined);
  assert.equal(lastFingerprint([user("a"), m]), fingerprint(m));
});

test("tokens: units keep a tool call with its results", () => {
  const msgs = [
    user("a"),
    assistant("calling", [["c1", "read", { path: "x" }], ["c2", "read", { path: "y" }]]),
    toolResult("c1", "read", "x content"),
    toolResult("c2", "read", "y content"),
    assistant("done"),
  ];
  assert.deepEqual(units(msgs), [
    { start: 0, end: 1 },
    { start: 1, end: 4 },
    { start: 4, end: 5 },
  ]);
  assert.ok(estimateTokens(msgs[1]) > 0);
  assert.equal(estimateTokens(user("x".repeat(400))), 100);
});

test("fitToBudget drops the oldest units, never inserted messages nor the newest unit", () => {
  const summary = { role: "user", content: "summary ".repeat(50), __ctxhost: { inserted: true, kind: "compaction-summary" } };
  const msgs = [
    summary,
    user("old ".repeat(100)),
    assistant("calling", [["c1", "read", { path: "x" }]]),
    toolResult("c1", "read", "y".repeat(400)),
    user("new ".repeat(100)),
  ];
  const total = msgs.reduce((s, m) => s + estimateTokens(m), 0);
  const fit = fitToBudget(msgs, total - 50, total, isInserted);
  assert.equal(fit.dropped, 1, "the old user message goes first");
  assert.deepEqual(fit.messages, [summary, msgs[2], msgs[3], msgs[4]]);
  const tight = fitToBudget(msgs, 10, total, isInserted);
  assert.deepEqual(tight.messages, [summary, msgs[4]], "the tool call and its result go together");
  assert.equal(tight.dropped, 3);
  assert.ok(tight.total > 10, "what cannot go stays, reported over budget");
  const fits = fitToBudget(msgs, total, total, isInserted);
  assert.equal(fits.dropped, 0);
});

test("inserted messages without a timestamp get their neighbour's, so OpenClaw never prints 1970", () => {
  const restore = { role: "user", content: [{ type: "text", text: "[Checkpoint cp_1 …]" }], __ctxhost: { inserted: true, kind: "custom" } };
  const kept = user("kept");
  const out = withTimestamps([restore, kept]);
  assert.equal(out[0].timestamp, kept.timestamp);
  assert.equal(out[1], kept, "kept messages are the runtime's own objects");
  assert.equal(restore.timestamp, undefined, "the input is not mutated");
  const alone = withTimestamps([restore]);
  assert.ok(Math.abs(alone[0].timestamp - Date.now()) < 5000);
  const stamped = { ...restore, timestamp: 42 };
  assert.equal(withTimestamps([stamped])[0], stamped);
});
