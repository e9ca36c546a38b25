// Shared pieces of the pi extension's tests: a stand-in for pi's ExtensionAPI that records what
// the extension registers and lets a test fire events the way pi does, a ctx whose session
// manager serves a branch of entries, entry builders, and the real `ctxhost serve` binary.

import { rmSync } from "node:fs";
import extension from "../index.js";
import { assistantMessage, bigTurnWith, serveSupport } from "../../client/test-support/common.js";
export { files, smallWindow, waitFor } from "../../client/test-support/common.js";
export { readJsonl } from "../../client/test-support/common.js";

/**
 * The package's folder; the binary under test ($CTXHOST_BIN, else the workspace's debug build);
 * why the serve tests cannot run here, or false; a fresh CTXHOST_HOME with a ctxhost.json.
 */
export const { PACKAGE_DIR, BINARY, skipServe, tempHome } = serveSupport(import.meta.url, "ctxhost-pi-test-");

let clock = Date.parse("2026-11-20T09:00:00Z");
let nextId = 0;

/** A session entry id in pi's style (8 hex digits). */
function id() {
  nextId += 1;
  return (0x1000_0000 + nextId * 7919).toString(16).slice(-8);
}

/** A user message as pi stores it. @param {string} text */
export function user(text) {
  clock += 1000;
  return { role: "user", content: [{ type: "text", text }], timestamp: clock };
}

/** An assistant message as pi's openai-completions provider stores it. */
export function assistant(text, toolCalls = []) {
  clock += 1000;
  return assistantMessage(text, toolCalls, clock);
}

/** A tool result answering `callId`. */
export function toolResult(callId, name, text, isError = false) {
  clock += 1000;
  return { role: "toolResult", toolCallId: callId, toolName: name, content: [{ type: "text", text }], isError, timestamp: clock };
}

/** A turn of `chars` characters of user text plus a short reply. */
export const bigTurn = bigTurnWith({ user, assistant });

/**
 * pi's session as a tree of entries on one branch: append messages, compactions, switch to a
 * new branch; `context()` is the message list pi's `context` event would carry.
 */
export class Branch {
  /** @type {any[]} */
  entries = [];

  /** @param {any} entry */
  #add(entry) {
    const parentId = this.entries.at(-1)?.id ?? null;
    clock += 10;
    const full = { ...entry, id: id(), parentId, timestamp: new Date(clock).toISOString() };
    this.entries.push(full);
    return full;
  }

  /** @param {...any} messages */
  append(...messages) {
    for (const message of messages) this.#add({ type: "message", message });
    return this;
  }

  /** @param {{ summary: string, firstKeptEntryId: string, tokensBefore: number, details?: unknown }} c */
  compact(c) {
    return this.#add({ type: "compaction", ...c, fromHook: true });
  }

  /** The entry holding `message` (by identity). @param {any} message */
  entryOf(message) {
    return this.entries.find((e) => e.message === message);
  }

  /**
   * What pi's context holds: after the latest compaction, its summary and the messages from its
   * first kept entry on; else every message.
   */
  context() {
    const at = this.entries.findLastIndex((e) => e.type === "compaction");
    if (at < 0) return this.entries.filter((e) => e.type === "message").map((e) => structuredClone(e.message));
    const c = this.entries[at];
    const first = this.entries.findIndex((e) => e.id === c.firstKeptEntryId);
    const summary = { role: "compactionSummary", summary: c.summary, tokensBefore: c.tokensBefore, timestamp: new Date(c.timestamp).getTime() };
    const kept = this.entries.slice(first).filter((e) => e.type === "message").map((e) => structuredClone(e.message));
    return [summary, ...kept];
  }
}

/**
 * The extension loaded into a stand-in for pi: `emit(event, payload)` runs its handlers the way
 * pi's runner does (in order; a throwing handler is reported and skipped) and returns the last
 * result.
 * @param {{ home: string, binary?: string, branch: Branch, sessionId?: string, contextWindow?: number }} opts
 */
export function loadExtension(opts) {
  /** @type {Map<string, Function[]>} */
  const handlers = new Map();
  /** @type {any[]} */
  const tools = [];
  /** @type {Map<string, any>} */
  const flags = new Map();
  /** @type {string[]} */
  const errors = [];
  const flagValues = { "ctxhost-bin": opts.binary ?? BINARY, "ctxhost-home": opts.home };
  const pi = {
    on: (/** @type {string} */ event, /** @type {Function} */ handler) => handlers.set(event, [...(handlers.get(event) ?? []), handler]),
    registerTool: (/** @type {any} */ tool) => {
      const at = tools.findIndex((t) => t.name === tool.name);
      if (at >= 0) tools[at] = tool;
      else tools.push(tool);
    },
    registerFlag: (/** @type {string} */ name, /** @type {any} */ options) => flags.set(name, options),
    getFlag: (/** @type {string} */ name) => /** @type {any} */ (flagValues)[name],
    getAllTools: () => [{ name: "read" }, { name: "bash" }, { name: "edit" }, { name: "write" }, ...tools],
  };
  extension(pi);
  const ctx = {
    hasUI: false,
    cwd: "/work",
    model: { provider: "fake", id: "fake-model", contextWindow: opts.contextWindow ?? 100_000 },
    sessionManager: {
      getSessionId: () => opts.sessionId ?? "0c2d9a61-pi-test",
      getBranch: () => opts.branch.entries,
      getSessionFile: () => undefined,
    },
  };
  /**
   * @param {string} name
   * @param {any} [event]
   */
  const emit = async (name, event = {}) => {
    let result;
    for (const handler of handlers.get(name) ?? []) {
      try {
        const r = await handler({ type: name, ...event }, ctx);
        if (r !== undefined) result = r;
      } catch (err) {
        errors.push(`${name}: ${err instanceof Error ? err.message : err}`);
      }
    }
    return result;
  };
  return { pi, handlers, tools, flags, emit, ctx, errors };
}

/** The sidecars the extension started in this process (one per config). */
export function sidecars() {
  const all = /** @type {Map<string, { sidecar: any }> | undefined} */ (/** @type {any} */ (globalThis)[Symbol.for("ctxhost.pi.sidecars")]);
  return [...(all?.values() ?? [])].map((e) => e.sidecar);
}

/**
 * What the end of a pi process does to the extension's sidecars of `home`: they are shut down
 * and forgotten, so the next extension loaded starts its own.
 * @param {string} home
 */
export async function endProcess(home) {
  const all = /** @type {Map<string, { sidecar: any }> | undefined} */ (/** @type {any} */ (globalThis)[Symbol.for("ctxhost.pi.sidecars")]);
  for (const [key, entry] of [...(all?.entries() ?? [])]) {
    if (!key.includes(JSON.stringify(home))) continue;
    await entry.sidecar.shutdown();
    all?.delete(key);
  }
}

/** Shuts down the sidecars of `home` and removes it. @param {string} home */
export async function cleanup(home) {
  await endProcess(home);
  rmSync(home, { recursive: true, force: true });
}

