// What the OpenClaw plugin's and the pi extension's tests share: the real `ctxhost serve`
// binary, a scratch CTXHOST_HOME, a config that compacts soon, the fake model's assistant
// messages, big turns, and small file and timing helpers (the end-to-end checks read files with
// them too).

import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The binary under test for the package at `packageDir`: $CTXHOST_BIN (relative to the
 * package), else the workspace's debug build.
 * @param {string} packageDir
 */
export function binaryFor(packageDir) {
  return resolve(packageDir, process.env.CTXHOST_BIN ?? "../../target/debug/ctxhost");
}

/**
 * Why the serve tests cannot run without `binary` (printed visibly), or false.
 * @param {string} binary
 * @returns {string | false}
 */
export function skipWithout(binary) {
  if (existsSync(binary)) return false;
  const why = `no ctxhost binary at ${binary} (build it with \`cargo build -p ctxhost-cli\` or set CTXHOST_BIN)`;
  process.stderr.write(`\n*** SKIPPING the ctxhost serve tests: ${why} ***\n\n`);
  return why;
}

/**
 * A fresh CTXHOST_HOME (its name starting with `prefix`) with a ctxhost.json.
 * @param {string} prefix
 * @param {object} [config] the ctxhost.json content
 */
export function freshHome(prefix, config = {}) {
  const home = mkdtempSync(join(tmpdir(), prefix));
  writeFileSync(join(home, "ctxhost.json"), JSON.stringify(config, null, 2));
  return home;
}

/**
 * What a package's serve tests need, for its test-support module at `moduleUrl` (one folder
 * below the package): the package's folder, the binary under test, whether the serve tests must
 * skip, and fresh CTXHOST_HOMEs whose names start with `homePrefix`.
 * @param {string} moduleUrl the test-support module's `import.meta.url`
 * @param {string} homePrefix
 */
export function serveSupport(moduleUrl, homePrefix) {
  const PACKAGE_DIR = resolve(dirname(fileURLToPath(moduleUrl)), "..");
  const BINARY = binaryFor(PACKAGE_DIR);
  return {
    PACKAGE_DIR,
    BINARY,
    /** Why the serve tests cannot run here (printed visibly), or false. @returns {string | false} */
    skipServe: () => skipWithout(BINARY),
    /** A fresh CTXHOST_HOME with a ctxhost.json. @param {object} [config] the ctxhost.json content */
    tempHome: (config = {}) => freshHome(homePrefix, config),
  };
}

/**
 * A ctxhost.json for `engine` whose compaction leaves little room in a window of
 * `contextWindow` tokens, so a few big turns compact.
 * @param {string} engine
 * @param {number} contextWindow
 */
export function smallWindow(engine, contextWindow) {
  return {
    plugins: { slots: { contextEngine: engine } },
    agents: {
      defaults: {
        contextWindow,
        compaction: { reserveTokens: 500, reserveTokensFloor: 0, summarizeKeepRecentTokens: 800, fullKeepRecentTokens: 600 },
      },
    },
  };
}

/**
 * An assistant message from the fake model as pi's openai-completions provider stores it (the
 * shape OpenClaw keeps too), dated `timestamp`.
 * @param {string} text
 * @param {[string, string, unknown][]} toolCalls each as [id, name, arguments]
 * @param {number} timestamp
 */
export function assistantMessage(text, toolCalls, timestamp) {
  return {
    role: "assistant",
    content: [{ type: "text", text }, ...toolCalls.map(([id, name, args]) => ({ type: "toolCall", id, name, arguments: args }))],
    api: "openai-completions",
    provider: "fake",
    model: "fake-model",
    usage: { input: 10, output: 10, cacheRead: 0, cacheWrite: 0, totalTokens: 20, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
    stopReason: toolCalls.length ? "toolUse" : "stop",
    timestamp,
  };
}

/**
 * `bigTurn(label, chars)` over a runtime's own message builders: `chars` characters of user text
 * plus a short reply.
 * @param {{ user: (text: string) => object, assistant: (text: string) => object }} builders
 */
export function bigTurnWith({ user, assistant }) {
  /** @param {string} label @param {number} [chars] */
  return (label, chars = 4000) => {
    let text = `${label}: `;
    while (text.length < chars) text += `notes about ${label} that take room in the context window. `;
    return [user(text), assistant(`reply to ${label}`)];
  };
}

/** Every file under `dir`, recursively. @param {string} dir @returns {string[]} */
export function files(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

/** The JSON entries of a JSONL file (a mirror, a ledger). @param {string} path */
export function readJsonl(path) {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

/** Waits until `predicate` holds, up to `ms`. */
export async function waitFor(predicate, ms = 5000, step = 50) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await predicate()) return true;
    await new Promise((r) => setTimeout(r, step));
  }
  return predicate();
}
