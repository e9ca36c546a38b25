#!/usr/bin/env node
// Checks agent processes that ran at the same time on one CTXHOST_HOME (.ci/e2e-many:
// pi and OpenClaw agents together): every session whose prompt carries one of the markers has exactly one
// mirror holding it, and every turn of that mirror's ledger was assembled by ctxhost on the
// expected engine (outcome ok, no fallback). An agent that fell back to its own context, or was
// refused the home, leaves no record or a degraded one.
//
//   node check-many.mjs --ctxhost-home DIR --engine legacy --markers "M1 M2 …"
//
// Exits 1 naming every failed check.

import { arg, check, failures, files, readJsonl } from "./checks.mjs";

const home = arg("ctxhost-home");
const engine = arg("engine");
const markers = arg("markers").split(/\s+/).filter(Boolean);

const mirrors = files(`${home}/sessions`).filter((f) => f.endsWith(".jsonl") && !f.endsWith(".ledger.jsonl"));
console.log(`e2e: ${markers.length} agents at once on one home (${mirrors.length} mirrors)`);
for (const marker of markers) {
  const holding = mirrors.filter((m) => readJsonl(m).some((e) => JSON.stringify(e).includes(marker)));
  check(holding.length === 1, `${marker}: one mirror holds it (${holding.length})`);
  if (holding.length !== 1) continue;
  let records = [];
  try {
    records = readJsonl(`${holding[0]}.ledger.jsonl`);
  } catch (err) {
    check(false, `${marker}: its ledger can be read (${err})`);
    continue;
  }
  const bad = records.filter((r) => r.outcome !== "ok" || r.engine !== engine || r.configuredEngine);
  check(records.length >= 1 && bad.length === 0, `${marker}: ${records.length} turn(s) assembled by ${engine}, none degraded (${bad.map((r) => `${r.outcome}/${r.engine}`).join(", ") || "none"})`);
}
if (failures.length) {
  console.log(`e2e: ${failures.length} check(s) failed for the agents at once`);
  process.exit(1);
}
