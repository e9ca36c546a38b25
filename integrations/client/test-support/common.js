// What the OpenClaw plugin's and the pi extension's tests share: the real `ctxhost serve`
// binary, a scratch CTXHOST_HOME, and small file and timing helpers.

import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

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
