// ctxhost's health in OpenClaw: the gateway service that reports a sidecar that is down, a
// quarantined engine or a turn that fell back as the plugin's failure, `openclaw ctxhost status`,
// and the last failure the plugin keeps itself.
//
//   node --test integrations/openclaw/test/*.test.js     (CTXHOST_BIN overrides the binary)

import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { describe, test } from "node:test";
import plugin from "../index.js";
import { FailureLog, checkHealth, formatReport, healthService, summarize } from "../src/health.js";
import { runStatus } from "../src/status-command.js";
import { Sidecar } from "../../client/sidecar.js";
import { BINARY, assistant, setup, skipServe, tempHome, user, waitFor } from "../test-support/harness.js";

const KEY = "agent:main:health";
const SID = "5e1f-health";
const GHOST = { plugins: { slots: { contextEngine: "ghost" }, contextEngineFallback: "legacy" } };

/** A stand-in for OpenClaw's service context: records what the service reported. */
function serviceContext() {
  /** @type {{ kind: "failure" | "clear", message?: string }[]} */
  const events = [];
  return {
    events,
    ctx: {
      logger: { info() {}, warn() {}, error() {}, debug() {} },
      serviceHealth: {
        reportFailure: (/** @type {unknown} */ e) => events.push({ kind: "failure", message: e instanceof Error ? e.message : String(e) }),
        clearFailure: () => events.push({ kind: "clear" }),
      },
    },
    last: () => events.at(-1),
  };
}

/** One turn through the engine: bootstrap, assemble, commit. @param {ReturnType<typeof setup>} s */
async function driveTurn(s, key = KEY) {
  await s.engine.bootstrap({ sessionId: SID, sessionKey: key, sessionFile: key });
  const history = [user("hello"), assistant("hi")];
  await s.engine.commitTurn({ sessionId: SID, sessionKey: key, advancementKey: "t-0", messages: history });
  return s.engine.assemble({ sessionId: SID, sessionKey: key, messages: history, tokenBudget: 50_000 });
}

test("FailureLog: a failure stays until a served turn follows it, and tells its listeners", () => {
  const log = new FailureLog();
  let told = 0;
  const off = log.subscribe(() => told++);
  assert.equal(log.recovered, false);
  log.served();
  assert.equal(told, 0, "serving with no failure tells nobody");
  log.record({ operation: "assemble", sessionKey: KEY, message: "boom" });
  assert.equal(told, 1);
  assert.equal(log.last?.operation, "assemble");
  assert.equal(log.recovered, false);
  log.served();
  assert.equal(told, 2, "the recovery is news");
  assert.equal(log.recovered, true);
  log.served();
  assert.equal(told, 2, "later served turns are not");
  assert.equal(log.last?.message, "boom", "the last failure is kept after the recovery");
  off();
  log.record({ operation: "commitTurn", message: "again" });
  assert.equal(told, 2);
  assert.equal(log.count, 2);
});

test("summarize and formatReport: a sidecar that is down, and the plugin's unrecovered failure", () => {
  const report = {
    ok: false,
    status: /** @type {const} */ ("down"),
    checkedAt: "2026-11-26T00:00:00.000Z",
    quarantined: [],
    sessions: undefined,
    degradedSessions: [],
    lastError: undefined,
    pluginFailure: { at: "2026-11-26T00:00:00.000Z", operation: "assemble", sessionKey: KEY, message: "spawn ENOENT", outcome: "its own history" },
    pluginRecovered: false,
    error: "ctxhost serve: could not run `/nope`: spawn /nope ENOENT",
  };
  const line = summarize(report);
  assert.match(line, /^ctxhost is not running: .*ENOENT/);
  assert.match(line, /plugin: assemble failed at .*spawn ENOENT/);
  const text = formatReport(report).join("\n");
  assert.match(text, /^ctxhost: DOWN/);
  assert.match(text, /plugin's last failure \(not recovered\)/);
  assert.ok(summarize({ ...report, error: "x".repeat(2000) }).length <= 480, "the summary fits OpenClaw's line");
});

test("register(): the CLI command in every mode that collects it, the service only in full, runtime parts never for CLI metadata", () => {
  /** @param {string} mode */
  const register = (mode) => {
    /** @type {string[]} */
    const got = [];
    plugin.register({
      registrationMode: mode,
      pluginConfig: { binary: "/nonexistent/ctxhost", home: "/tmp/nowhere" },
      logger: { info() {}, warn() {}, error() {} },
      registerContextEngine: () => got.push("engine"),
      registerTool: () => got.push("tool"),
      registerService: (/** @type {any} */ s) => got.push(`service:${s.id}`),
      registerCli: (/** @type {any} */ _r, /** @type {any} */ opts) => got.push(`cli:${opts.descriptors.map((/** @type {any} */ d) => d.name).join(",")}`),
    });
    return got;
  };
  assert.deepEqual(register("full"), ["cli:ctxhost", "engine", "tool", "service:ctxhost-health"]);
  assert.deepEqual(register("discovery"), ["cli:ctxhost", "engine", "tool"]);
  assert.deepEqual(register("cli-metadata"), ["cli:ctxhost"]);
});

test("the registered CLI adds `ctxhost status [--json]` to OpenClaw's commander program", () => {
  /** @type {any} */
  let registrar;
  plugin.register({
    registrationMode: "cli-metadata",
    pluginConfig: {},
    logger: { info() {}, warn() {} },
    registerCli: (/** @type {any} */ r) => (registrar = r),
  });
  /** @type {string[]} */
  const seen = [];
  const command = (/** @type {string} */ path) => ({
    command: (/** @type {string} */ name) => (seen.push(`${path}${name}`), command(`${path}${name} `)),
    description: function () { return this; },
    option: function (/** @type {string} */ flag) { seen.push(`${path.trim()} ${flag}`); return this; },
    action: function () { seen.push(`${path.trim()} action`); return this; },
  });
  registrar({ program: command(""), parentPath: [], config: {}, logger: {} });
  assert.deepEqual(seen, ["ctxhost", "ctxhost status", "ctxhost status --json", "ctxhost status action"]);
});

describe("health through ctxhost serve", { skip: skipServe(), concurrency: false }, () => {
  test("a quarantined engine: the service reports the plugin's failure naming it and its cause; the turn it degraded is counted", async (t) => {
    const home = tempHome(GHOST);
    const s = setup({ home });
    t.after(s.cleanup);
    const out = await driveTurn(s);
    assert.equal(out.messages.length, 2, "legacy served the turn");
    const oc = serviceContext();
    const service = healthService(() => ({ sidecar: s.sidecar, failures: s.bridge.failures }));
    t.after(() => service.stop());
    service.start(oc.ctx);
    assert.ok(await waitFor(() => oc.events.length > 0), "the service checked at start");
    assert.equal(oc.last()?.kind, "failure");
    const message = oc.last()?.message ?? "";
    assert.match(message, /^ctxhost degraded/);
    assert.match(message, /engine `ghost` quarantined: context engine `ghost` .*does not exist/);
    assert.match(message, /`legacy` serves instead of `ghost`/);
    assert.match(message, /1 of 1 turns degraded/);
    assert.match(message, /last error: the configured engine `ghost` is quarantined/);
    const report = service.latest;
    assert.ok(report && !report.ok);
    assert.equal(report.configuredEngine, "ghost");
    assert.equal(report.runningEngine, "legacy");
    assert.deepEqual(report.quarantined.map((q) => q.engine), ["ghost"]);
    assert.deepEqual(report.degradedSessions.map((d) => d.sessionKey), [KEY]);
    assert.equal(report.pluginFailure, undefined, "the plugin itself saw nothing fail: serve fell back");
  });

  test("a healthy engine reads ok: the service clears the failure; a failure the plugin saw turns it red until a served turn", async (t) => {
    const home = tempHome({ plugins: { slots: { contextEngine: "legacy" } } });
    const s = setup({ home });
    t.after(s.cleanup);
    await driveTurn(s);
    const oc = serviceContext();
    const service = healthService(() => ({ sidecar: s.sidecar, failures: s.bridge.failures }));
    t.after(() => service.stop());
    service.start(oc.ctx);
    assert.ok(await waitFor(() => oc.events.length > 0));
    assert.deepEqual(oc.last(), { kind: "clear" });
    assert.equal(service.latest?.status, "ok");
    assert.equal(service.latest?.configuredEngine, "legacy");
    assert.equal(service.latest?.circuitOpen ?? null, null);

    // The plugin's own failure (as an assemble that fell back records it) is reported at once,
    // not at the next poll, and a turn ctxhost serves afterwards clears it.
    s.bridge.failures.record({ operation: "assemble", sessionKey: KEY, message: "simulated", outcome: "its own history" });
    assert.ok(await waitFor(() => oc.last()?.kind === "failure"), "reported without waiting for the poll");
    assert.match(oc.last()?.message ?? "", /^ctxhost degraded; plugin: assemble failed at .*: simulated/);
    const history = [user("hello"), assistant("hi")];
    await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: history, tokenBudget: 50_000 });
    assert.ok(await waitFor(() => oc.last()?.kind === "clear"), "cleared by the served turn");
    assert.equal(service.latest?.pluginRecovered, true);
    assert.equal(service.latest?.pluginFailure?.message, "simulated", "still shown, as recovered");
  });

  test("a dead sidecar (the binary cannot run) reads down, and the assemble that fell back is kept as the plugin's last failure", async (t) => {
    const home = tempHome({});
    const s = setup({ home, binary: "/nonexistent/ctxhost" });
    t.after(s.cleanup);
    const history = [user("hello"), assistant("hi")];
    const out = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: history, tokenBudget: 50_000 });
    assert.equal(out.messages.length, 2, "OpenClaw's history passed through");
    assert.equal(s.bridge.failures.last?.operation, "assemble");
    const oc = serviceContext();
    const service = healthService(() => ({ sidecar: s.sidecar, failures: s.bridge.failures }));
    t.after(() => service.stop());
    service.start(oc.ctx);
    assert.ok(await waitFor(() => oc.events.length > 0));
    assert.equal(oc.last()?.kind, "failure");
    assert.match(oc.last()?.message ?? "", /^ctxhost is not running: /);
    assert.match(oc.last()?.message ?? "", /plugin: assemble failed at .*\/nonexistent\/ctxhost/);
    assert.equal(service.latest?.status, "down");
    assert.match(formatReport(/** @type {any} */ (service.latest)).join("\n"), /plugin's last failure \(not recovered\): .* assemble of agent:main:health: .*; OpenClaw got its own history, trimmed to the budget/);
  });

  test("a sidecar killed after it answered: the next check starts a new one and reads ok", async (t) => {
    const home = tempHome({});
    const s = setup({ home });
    t.after(s.cleanup);
    assert.equal((await checkHealth({ sidecar: s.sidecar, failures: s.bridge.failures })).status, "ok");
    const pid = s.sidecar.pid;
    s.sidecar.kill("SIGKILL");
    assert.ok(await waitFor(() => !s.sidecar.running));
    const again = await checkHealth({ sidecar: s.sidecar, failures: s.bridge.failures });
    assert.equal(again.status, "ok", again.error);
    assert.notEqual(s.sidecar.pid, pid);
  });

  test("`openclaw ctxhost status`: exit 1 and DEGRADED naming the quarantined engine; exit 0 and OK when healthy; JSON on request", async (t) => {
    const ghost = tempHome(GHOST);
    const healthy = tempHome({});
    t.after(() => {
      rmSync(ghost, { recursive: true, force: true });
      rmSync(healthy, { recursive: true, force: true });
    });
    /** @type {string[]} */
    let out = [];
    const io = { out: (/** @type {string} */ s) => out.push(s) };
    const config = (/** @type {string} */ home) => ({ binary: BINARY, home, callTimeoutMs: 20_000 });

    assert.equal(await runStatus(config(ghost), {}, io), 1);
    assert.match(out.join("\n"), /^ctxhost: DEGRADED\n {2}engine: ghost \(serving: legacy\)/);
    assert.match(out.join("\n"), /quarantined: ghost: context engine `ghost` .*does not exist/);

    out = [];
    assert.equal(await runStatus(config(healthy), { json: true }, io), 0);
    const json = JSON.parse(out.join("\n"));
    assert.equal(json.ok, true);
    assert.equal(json.status, "ok");
    assert.equal(json.configuredEngine, "legacy");
    assert.equal(json.home, healthy);

    out = [];
    assert.equal(await runStatus({ ...config(healthy), binary: "/nonexistent/ctxhost" }, {}, io), 1);
    assert.match(out.join("\n"), /^ctxhost: DOWN\n {2}sidecar: not answering: .*\/nonexistent\/ctxhost/);
  });

  test("through register(): the engine OpenClaw builds and the service share one sidecar and one failure log", async (t) => {
    const home = tempHome(GHOST);
    /** @type {any[]} */
    const services = [];
    /** @type {Function | undefined} */
    let factory;
    plugin.register({
      registrationMode: "full",
      pluginConfig: { binary: BINARY, home, callTimeoutMs: 20_000 },
      logger: { info() {}, warn() {}, error() {} },
      registerContextEngine: (/** @type {string} */ _id, /** @type {Function} */ f) => (factory = f),
      registerService: (/** @type {any} */ s) => services.push(s),
    });
    const bridges = /** @type {Map<string, any>} */ (/** @type {any} */ (globalThis)[Symbol.for("ctxhost.openclaw.bridges")]);
    t.after(async () => {
      services[0]?.stop();
      for (const [key, bridge] of bridges) {
        if (!key.includes(home)) continue;
        await /** @type {Sidecar} */ (bridge.sidecar).shutdown();
        bridges.delete(key);
      }
      rmSync(home, { recursive: true, force: true });
    });
    assert.equal(services.length, 1);
    const engine = await /** @type {Function} */ (factory)({});
    await engine.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
    const history = [user("hello"), assistant("hi")];
    await engine.assemble({ sessionId: SID, sessionKey: KEY, messages: history, tokenBudget: 50_000 });
    const oc = serviceContext();
    services[0].start(oc.ctx);
    assert.ok(await waitFor(() => oc.events.length > 0));
    assert.equal(oc.last()?.kind, "failure");
    assert.match(oc.last()?.message ?? "", /engine `ghost` quarantined/);
    assert.match(oc.last()?.message ?? "", /1 of 1 turns degraded/, "the service asked the sidecar the engine used");
    await engine.dispose();
  });
});
