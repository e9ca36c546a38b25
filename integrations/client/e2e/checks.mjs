// What the end-to-end check scripts share (integrations/openclaw/e2e/check.mjs,
// integrations/pi/e2e/check.mjs, check-recall.mjs here): their command line, the record of
// passed and failed checks, and reading what a run left behind. One script runs per process, so
// the record is this module's own state.

import { basename } from "node:path";
export { files, readJsonl } from "../test-support/common.js";

/** The script's arguments. */
export const args = process.argv.slice(2);

/**
 * The value after `--name`; exits 2 naming it when it is missing.
 * @param {string} name
 */
export function arg(name) {
  const i = args.indexOf(`--${name}`);
  if (i < 0 || i + 1 >= args.length) {
    console.error(`${basename(process.argv[1])}: --${name} is required`);
    process.exit(2);
  }
  return args[i + 1];
}

/** What failed so far, in order. @type {string[]} */
export const failures = [];

/** Prints one check's outcome and records a failure. @param {boolean} ok @param {string} what */
export function check(ok, what) {
  console.log(`  ${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures.push(what);
}

/** The text of a chat-completions or pi message (a string, or the text of its parts). @param {any} m */
export function text(m) {
  if (typeof m?.content === "string") return m.content;
  if (Array.isArray(m?.content)) return m.content.map((/** @type {any} */ p) => (typeof p?.text === "string" ? p.text : "")).join("\n");
  return "";
}
