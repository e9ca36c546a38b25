// What the JavaScript drivers share: their command line and how they write their record.

import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { load } from "../neutral.mjs";

/**
 * The model's context window every agent is given (Hermes refuses less than 64k). It is wider
 * than ctxhost's `agents.defaults.contextWindow`, so ctxhost's window is the one that decides,
 * the same for every agent: the server narrows a runtime's budget to it.
 */
export const MODEL_WINDOW = 128_000;

/** `--fixture`, `--home`, `--binary`, `--out`, each required. */
export function driverArgs() {
  const { values } = parseArgs({
    options: { fixture: { type: "string" }, home: { type: "string" }, binary: { type: "string" }, out: { type: "string" } },
  });
  for (const name of ["fixture", "home", "binary", "out"]) {
    if (!values[name]) throw new Error(`--${name} is required`);
  }
  return {
    fixture: load(/** @type {string} */ (values.fixture)),
    home: /** @type {string} */ (values.home),
    binary: /** @type {string} */ (values.binary),
    out: /** @type {string} */ (values.out),
  };
}

/**
 * Writes the record, then shuts the sidecars down so their last writes are on disk when the
 * comparer reads the mirror.
 * @param {string} path
 * @param {import("../neutral.mjs").RawRecord} record
 * @param {{ shutdown: () => Promise<void> }[]} sidecars
 */
export async function writeRecord(path, record, sidecars) {
  for (const sidecar of sidecars) await sidecar.shutdown();
  writeFileSync(path, `${JSON.stringify(record, null, 2)}\n`);
}
