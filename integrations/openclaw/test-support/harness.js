// Shared pieces of the plugin tests: the real `ctxhost serve` binary, a temp CTXHOST_HOME per
// test, an engine wired to a sidecar that records every call, and message builders.

import { readFileSync, rmSync } from "node:fs";
import { Bridge, CtxhostContextEngine } from "../src/engine.js";
import { Sidecar, describeNotification } from "../../client/sidecar.js";
import { createTiming } from "../../client/timing.js";
import { assistantMessage, bigTurnWith, serveSupport } from "../../client/test-support/common.js";
export { files, smallWindow, waitFor } from "../../client/test-support/common.js";
export { readJsonl as readMirror } from "../../client/test-support/common.js";

/**
 * The package's folder; the binary under test ($CTXHOST_BIN, else the workspace's debug build);
 * why the serve tests cannot run here, or false; a fresh CTXHOST_HOME (removed by `cleanup`).
 */
export const { PACKAGE_DIR, BINARY, skipServe, tempHome } = serveSupport(import.meta.url, "ctxhost-openclaw-test-");

/**
 * An engine over a real sidecar, recording calls and log lines.
 * @param {{ home: string, callTimeoutMs?: number, binary?: string }} opts
 */
export function setup(opts) {
  /** @type {{ method: string, ok: boolean, bytesOut: number }[]} */
  const calls = [];
  /** @type {string[]} */
  const logs = [];
  /** @type {string[]} */
  const stderr = [];
  const sidecar = new Sidecar({
    binary: opts.binary ?? BINARY,
    home: opts.home,
    callTimeoutMs: opts.callTimeoutMs ?? 20_000,
    client: { name: "plugin-tests" },
    warn: (m) => logs.push(`warn: ${m}`),
    stderr: (l) => stderr.push(l),
    onCall: (t) => calls.push({ method: t.method, ok: t.ok, bytesOut: t.bytesOut }),
    onNotification: (method, params) => {
      const text = describeNotification(method, params);
      if (text) logs.push(`info: ${text}`);
    },
  });
  const log = { info: (/** @type {string} */ m) => logs.push(`info: ${m}`), warn: (/** @type {string} */ m) => logs.push(`warn: ${m}`) };
  const bridge = new Bridge(sidecar, log, createTiming(false));
  const engine = new CtxhostContextEngine(bridge, { version: "test" });
  const methods = () => calls.map((c) => c.method);
  /** Forgets the calls so far (the next assertions look at what follows). */
  const reset = () => {
    calls.length = 0;
  };
  const cleanup = async () => {
    await sidecar.shutdown();
    rmSync(opts.home, { recursive: true, force: true });
  };
  /** A second engine instance over the same sidecar (OpenClaw builds one per turn). */
  const another = () => new CtxhostContextEngine(bridge, { version: "test" });
  return { sidecar, bridge, engine, calls, logs, stderr, methods, reset, cleanup, another };
}

let clock = 1_795_000_000_000;

/** A user message as OpenClaw stores it, with fields ctxhost does not model. */
export function user(text) {
  clock += 1000;
  return { role: "user", content: text, timestamp: clock, __openclaw: { senderIsOwner: true }, idempotencyKey: `k-${clock}:user` };
}

/** An assistant message as OpenClaw stores it: pi's shape, plus OpenClaw's own field. */
export function assistant(text, toolCalls = []) {
  clock += 1000;
  return { ...assistantMessage(text, toolCalls, clock), __openclaw: { turn: clock } };
}

/** A tool result answering `id`. */
export function toolResult(id, name, text) {
  clock += 1000;
  return { role: "toolResult", toolCallId: id, toolName: name, content: [{ type: "text", text }], isError: false, timestamp: clock };
}

/** A turn of `chars` characters of user text plus a short reply. */
export const bigTurn = bigTurnWith({ user, assistant });

/** Whether a process is alive. @param {number | undefined} pid */
export function alive(pid) {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    // A zombie (exited, not yet reaped by whoever inherited it) is gone for our purposes.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return true;
  }
}

