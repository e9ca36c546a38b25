// The recall tools (ctx_search, ctx_expand) as OpenClaw agent tools: what OpenClaw is told at
// registration, and how a call behaves when the sidecar answers, refuses, dies or hangs. These
// run over ../client/test-support/fake-serve.mjs (a protocol stand-in) because the failures are needed at
// one exact call; the real binary is exercised in serve.test.js ("recall tools").
//
//   node --test integrations/openclaw/test/*.test.js

import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import plugin from "../index.js";
import { Sidecar } from "../../client/sidecar.js";
import { callSessionTool } from "../../client/tools.js";
import { RECALL_TOOLS, openclawTools } from "../src/tools.js";
import { PACKAGE_DIR } from "../test-support/harness.js";

const FAKE = join(PACKAGE_DIR, "..", "client", "test-support", "fake-serve.mjs");
const KEY = "agent:main:tools";

/**
 * A Sidecar over the fake server; `sent()` lists the methods it received, in order.
 * @param {import("node:test").TestContext} t
 * @param {Record<string, string>} [env]
 * @param {number} [callTimeoutMs]
 */
function fakeSidecar(t, env = {}, callTimeoutMs = 5000) {
  const dir = mkdtempSync(join(tmpdir(), "ctxhost-fake-serve-"));
  const logFile = join(dir, "requests.jsonl");
  /** @type {string[]} */
  const warnings = [];
  const sidecar = new Sidecar({
    binary: process.execPath,
    args: [FAKE],
    env: { ...process.env, FAKE_SERVE_LOG: logFile, FAKE_SERVE_ONCE: join(dir, "once"), ...env },
    callTimeoutMs,
    warn: (m) => warnings.push(m),
    stderr: () => {},
  });
  t.after(async () => {
    await sidecar.shutdown(500);
    rmSync(dir, { recursive: true, force: true });
  });
  const requests = () => {
    try {
      return readFileSync(logFile, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
    } catch {
      return [];
    }
  };
  return { sidecar, warnings, sent: () => requests().map((r) => r.method), requests };
}

/** The text of an OpenClaw tool result. @param {any} r */
const textOf = (r) => r.content.map((/** @type {any} */ c) => c.text).join("");

test("the manifest declares exactly the tools register() registers, or OpenClaw drops them", () => {
  const manifest = JSON.parse(readFileSync(join(PACKAGE_DIR, "openclaw.plugin.json"), "utf8"));
  assert.deepEqual(manifest.contracts?.tools, ["ctx_search", "ctx_expand"]);
  /** @type {[any, any][]} */
  const registered = [];
  plugin.register({
    pluginConfig: { binary: "/nonexistent/ctxhost" },
    logger: { info() {}, warn() {} },
    registerContextEngine() {},
    registerTool: (/** @type {any} */ factory, /** @type {any} */ opts) => registered.push([factory, opts]),
  });
  assert.equal(registered.length, 1);
  const [factory, opts] = registered[0];
  assert.deepEqual(opts.names, manifest.contracts.tools);
  const tools = factory({ sessionKey: KEY, sessionId: "s" });
  assert.deepEqual(tools.map((/** @type {any} */ t) => t.name), manifest.contracts.tools);
  for (const tool of tools) {
    assert.equal(tool.catalogMode, "direct-only", `${tool.name} stays in the request's tools`);
    assert.equal(typeof tool.execute, "function");
    assert.equal(tool.parameters.type, "object");
    assert.equal(tool.parameters.additionalProperties, false);
  }
});

test("register() without registerTool (a discovery registration) still registers the engine", () => {
  let engines = 0;
  plugin.register({ pluginConfig: {}, logger: { info() {}, warn() {} }, registerContextEngine: () => (engines += 1) });
  assert.equal(engines, 1);
});

test("descriptions say THIS conversation up front, so a catalog cut or a model does not confuse them with memory_search / sessions_search", () => {
  for (const tool of RECALL_TOOLS) {
    const head = tool.description.slice(0, 60);
    assert.match(head, /THIS conversation/, `${tool.name}: ${JSON.stringify(head)}`);
    assert.doesNotMatch(tool.description, /\bmemory\b/i);
    assert.ok(tool.description.length <= 400, `${tool.name}: ${tool.description.length} characters`);
  }
  assert.match(RECALL_TOOLS[0].description, /ctx_expand/, "search points at expand");
  assert.deepEqual(RECALL_TOOLS[0].parameters.required, ["query"]);
});

test("a call opens the session when the server does not know it, then answers with the server's text", async (t) => {
  const f = fakeSidecar(t);
  const [search, expand] = openclawTools(() => f.sidecar, { sessionKey: KEY });
  const r = await search.execute("call-1", { query: "parser tables" });
  assert.match(textOf(r), /e1a2b3c4 · user · compacted: parser tables was here/);
  assert.equal(r.details.status, "ok");
  assert.deepEqual(f.sent(), ["initialize", "session.callTool", "session.bootstrap", "session.callTool"]);
  const calls = f.requests().filter((q) => q.method === "session.callTool");
  assert.deepEqual(calls.at(-1).params, { sessionKey: KEY, name: "ctx_search", arguments: { query: "parser tables" } });

  const e = await expand.execute("call-2", { id: "e1a2b3c4" });
  assert.equal(textOf(e), "[user] the original text of e1a2b3c4");
  assert.deepEqual(f.sent().slice(4), ["session.callTool"], "the session stays open");
});

test("the server's refusals reach the model as readable error results: a bad argument names the field", async (t) => {
  const f = fakeSidecar(t);
  const [search, expand] = openclawTools(() => f.sidecar, { sessionKey: KEY });
  const bad = await search.execute("c", { query: 42 });
  assert.equal(bad.details.status, "error");
  assert.match(textOf(bad), /^ctx_search: ctx_search: arguments\.query: invalid type/);
  const unknown = await expand.execute("c", { id: "unknown" });
  assert.equal(unknown.details.status, "error");
  assert.equal(textOf(unknown), "no entry `unknown` in this conversation");
  const odd = await callSessionTool(f.sidecar, KEY, "ctx_nothing", {});
  assert.equal(odd.isError, true);
  assert.match(odd.text, /unknown tool `ctx_nothing`/);
});

test("a missing binary: the tool answers that ctxhost is unavailable, it never throws", async () => {
  const sidecar = new Sidecar({ binary: "/nonexistent/ctxhost-bin", callTimeoutMs: 2000, warn: () => {} });
  const [search] = openclawTools(() => sidecar, { sessionKey: KEY });
  const r = await search.execute("c", { query: "anything" });
  assert.equal(r.details.status, "error");
  assert.match(textOf(r), /^ctx_search could not run: ctxhost is unavailable \(.*could not run \/nonexistent\/ctxhost-bin: .*ENOENT/);
  assert.match(textOf(r), /go on with what the context holds/);
  // A plugin config that cannot even produce a sidecar is an answer too.
  const [broken] = openclawTools(() => {
    throw new Error("bad config");
  }, { sessionKey: KEY });
  assert.match(textOf(await broken.execute("c", { query: "x" })), /ctx_search could not run: bad config/);
});

test("a sidecar that dies during the call is restarted, the session opened again and the call retried", async (t) => {
  const f = fakeSidecar(t, { FAKE_SERVE_MODE: "exit-on-call" });
  await f.sidecar.call("session.bootstrap", { sessionKey: KEY });
  const first = f.sidecar.pid;
  const r = await callSessionTool(f.sidecar, KEY, "ctx_search", { query: "after the crash" });
  assert.equal(r.isError, false, r.text);
  assert.match(r.text, /after the crash was here/);
  assert.notEqual(f.sidecar.pid, first, "a second server answered");
  assert.deepEqual(f.sent(), ["initialize", "session.bootstrap", "session.callTool", "initialize", "session.bootstrap", "session.callTool"]);
  assert.ok(f.warnings.some((w) => /exited with code 3/.test(w)), f.warnings.join("\n"));
});

test("a sidecar that never answers: the call times out into an error result", async (t) => {
  const f = fakeSidecar(t, { FAKE_SERVE_MODE: "hang-on-call" }, 600);
  await f.sidecar.call("session.bootstrap", { sessionKey: KEY });
  const start = Date.now();
  const r = await callSessionTool(f.sidecar, KEY, "ctx_expand", { id: "x" });
  assert.equal(r.isError, true);
  assert.match(r.text, /ctx_expand could not run: ctxhost is unavailable \(.*no answer within 600 ms/);
  assert.ok(Date.now() - start < 3000);
});

test("a server without the tool methods (older ctxhost) answers an error result, not a throw", async (t) => {
  const f = fakeSidecar(t, { FAKE_SERVE_MODE: "no-tools" });
  const r = await callSessionTool(f.sidecar, KEY, "ctx_search", { query: "x" });
  assert.equal(r.isError, true);
  assert.match(r.text, /unknown method `session.callTool`/);
});

test("no session key, or a cancelled call: error results", async (t) => {
  const f = fakeSidecar(t, { FAKE_SERVE_MODE: "hang-on-call" }, 5000);
  const [search] = openclawTools(() => f.sidecar, {});
  const none = await search.execute("c", { query: "x" });
  assert.match(textOf(none), /no session key/);
  assert.deepEqual(f.sent(), [], "nothing was sent");
  const controller = new AbortController();
  await f.sidecar.call("session.bootstrap", { sessionKey: KEY });
  const pending = callSessionTool(f.sidecar, KEY, "ctx_search", { query: "x" }, { signal: controller.signal });
  setTimeout(() => controller.abort(), 100);
  const r = await pending;
  assert.deepEqual(r, { text: "ctx_search was cancelled.", isError: true });
});

test("two copies of the plugin module in one process (as OpenClaw loads it) share one sidecar, and each recognises the other's errors", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "ctxhost-two-copies-"));
  const logFile = join(dir, "requests.jsonl");
  const binary = join(dir, "ctxhost");
  writeFileSync(binary, `#!/bin/sh\nFAKE_SERVE_LOG=${JSON.stringify(logFile)} exec ${JSON.stringify(process.execPath)} ${JSON.stringify(FAKE)} "$@"\n`);
  chmodSync(binary, 0o755);
  const copyA = (await import("../index.js?copy=a")).default;
  const copyB = (await import("../index.js?copy=b")).default;
  assert.notEqual(copyA, copyB, "two module instances");
  const config = { binary, home: dir, callTimeoutMs: 5000 };
  /** @type {any[]} */
  const engines = [];
  /** @type {any[]} */
  const toolFactories = [];
  const api = (/** @type {boolean} */ tools) => ({
    pluginConfig: config,
    logger: { info() {}, warn() {} },
    registerContextEngine: (/** @type {string} */ _id, /** @type {any} */ f) => engines.push(f),
    ...(tools ? { registerTool: (/** @type {any} */ f) => toolFactories.push(f) } : {}),
  });
  copyA.register(api(false));
  copyB.register(api(true));
  const engine = await engines[0]();
  t.after(async () => {
    await engine.dispose();
    rmSync(dir, { recursive: true, force: true });
  });
  await engine.bootstrap({ sessionId: "s", sessionKey: "agent:main:other", sessionFile: "x" });
  const [search] = toolFactories[0]({ sessionKey: KEY });
  // KEY is not open on the server: its -32001 comes from copy A's Sidecar and copy B's tool
  // must still take it for "open the session and retry".
  const r = await search.execute("c", { query: "shared" });
  assert.equal(r.details.status, "ok", r.content[0].text);
  const methods = readFileSync(logFile, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l).method);
  assert.deepEqual(methods, ["initialize", "session.bootstrap", "session.callTool", "session.bootstrap", "session.callTool"], "one server, started once");
});
