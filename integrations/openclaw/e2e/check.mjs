#!/usr/bin/env node
// Checks one engine's end-to-end run (.ci/e2e-openclaw): what the fake model received, and the
// ctxhost mirror of the session.
//
//   node check.mjs --engine legacy --session-key agent:main:e2e-legacy --turns 4 \
//     --requests model-requests.jsonl --ctxhost-home DIR
//
// Exits 1 naming every failed check.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { args, arg, check, failures, files, readJsonl, text } from "../../client/e2e/checks.mjs";

const engine = arg("engine");
const sessionKey = arg("session-key");
const turns = Number(arg("turns"));
const requestsFile = arg("requests");
const home = arg("ctxhost-home");
const turnsDir = arg("turns-dir");
/** The turn that ran with OpenClaw's own engine (0: none). */
const bypassed = args.includes("--bypassed") ? Number(arg("bypassed")) : 0;

const marker = (/** @type {number} */ turn) => `E2E-${engine}-TURN-${turn}:`;
/** The last line of a turn's prompt: the extractive summary never keeps it. */
const endMarker = (/** @type {number} */ turn) => `END-OF-E2E-${engine}-TURN-${turn}`;

/** The text of an AgentMessage in the mirror. @param {any} m */
function agentText(m) {
  if (typeof m?.content === "string") return m.content;
  if (Array.isArray(m?.content)) return m.content.map((p) => p?.text ?? "").join("\n");
  return "";
}

console.log(`e2e-openclaw: checks for ${engine} (${sessionKey}, ${turns} turns)`);

// --- the mirror ---------------------------------------------------------------------------
const sessionsDir = join(home, "sessions");
const sessionFiles = files(sessionsDir);
const tail = sessionKey.split(":").slice(2).join(":");
const mirrorFiles = sessionFiles.filter((f) => f.endsWith(".jsonl") && !f.includes(".ledger.") && f.includes(encodeURIComponent(tail)));
check(mirrorFiles.length === 1, `one mirror file for ${sessionKey} under ${sessionsDir} (found: ${mirrorFiles.join(", ") || "none"})`);
const resets = sessionFiles.filter((f) => f.includes(encodeURIComponent(tail)) && /\.(reset|torn)-/.test(f));
check(resets.length === 0, `the mirror was never reset or torn (${resets.join(", ") || "no .reset-/.torn- files"})`);
const internal = sessionFiles.filter((f) => f.includes("internal-session-effects"));
check(internal.length === 0, `no mirror files of internal (memory-flush) sessions (${internal.length})`);

/** @type {any[]} */
let entries = [];
if (mirrorFiles.length === 1) entries = readJsonl(mirrorFiles[0]);
const markers = entries.filter((e) => e.type === "custom" && e.customType === "ctxhost.mirror");
// A commit's marker names its advancement key; a sync's marker has none.
const keys = markers.map((e) => e.data?.advancementKey).filter((k) => typeof k === "string");
const commits = turns - (bypassed ? 1 : 0);
check(keys.length === commits, `the mirror holds ${commits} commits (markers with an advancement key: ${keys.length})`);
check(
  markers.length - keys.length === (bypassed ? 1 : 0),
  `syncs recorded in the mirror: ${markers.length - keys.length} (expected ${bypassed ? 1 : 0})`,
);
check(new Set(keys).size === keys.length, `every advancement key once (${new Set(keys).size} distinct of ${keys.length})`);
const messages = entries.filter((e) => e.type === "message").map((e) => e.message);
for (let turn = 1; turn <= turns; turn++) {
  const n = messages.filter((m) => m?.role === "user" && agentText(m).includes(marker(turn))).length;
  check(n === 1, `turn ${turn}'s prompt is in the mirror exactly once (${n})`);
}
if (bypassed) {
  // The turn after the bypass found the mirror behind and synced the missing turn's messages.
  const err = readFileSync(join(turnsDir, `${engine}-${bypassed + 1}.err`), "utf8");
  const syncs = err.split("\n").filter((l) => l.startsWith("[ctxhost-bridge] call session.sync")).length;
  check(syncs === 1, `turn ${bypassed + 1} synced the bypassed turn ${bypassed} into the mirror (session.sync calls: ${syncs})`);
}
const openclawFields = messages.filter((m) => m && "__openclaw" in m).length;
check(openclawFields > 0, `OpenClaw's own message fields survive in the mirror (__openclaw on ${openclawFields} messages)`);
const compactions = entries.filter((e) => e.type === "compaction");
check(compactions.length > 0, `ctxhost compacted the session (${compactions.length} compaction entries)`);

// --- what the model saw -------------------------------------------------------------------
const requests = readJsonl(requestsFile);
/** The requests of one turn: those whose last user message is the turn's prompt. @param {number} turn */
const requestsOf = (turn) =>
  requests.filter((r) => {
    const users = (r.body?.messages ?? []).filter((m) => m.role === "user");
    return users.some((m) => text(m).includes(endMarker(turn))) && !users.some((m) => text(m).includes(marker(turn + 1)));
  });
for (let turn = 1; turn <= turns; turn++) {
  const rs = requestsOf(turn);
  const sizes = rs.map((r) => `${r.body.messages.length} msgs/${JSON.stringify(r.body.messages).length} B`);
  check(rs.length >= 1, `turn ${turn} reached the model (${rs.length} request(s): ${sizes.join(", ")})`);
}
const last = requestsOf(turns).at(-1);
const lastMessages = last?.body?.messages ?? [];
const lastText = lastMessages.map(text).join("\n\n");
const system = lastMessages.filter((m) => m.role === "system" || m.role === "developer").map(text).join("\n");

// Once compacted, the model no longer sees turn 1's whole prompt.
check(
  !lastText.includes(endMarker(1)),
  `the last turn's request no longer carries turn 1's prompt verbatim (compacted away)`,
);
const latest = compactions.at(-1);
const summaryLine = String(latest?.summary ?? "")
  .split("\n")
  .map((l) => l.trim())
  .find((l) => l.length > 12 && !l.startsWith("#"));
const sawSummary = requests.some((r) => (r.body?.messages ?? []).some((m) => summaryLine && text(m).includes(summaryLine)));
check(
  Boolean(summaryLine) && sawSummary,
  `the model saw ctxhost's compaction summary (${JSON.stringify(summaryLine?.slice(0, 60))})`,
);

const epoch = requests.filter((r) => (r.body?.messages ?? []).some((m) => /^\[\w{3} 1970-01-01 /.test(text(m))));
check(epoch.length === 0, `no message reached the model dated 1970 (a missing timestamp): ${epoch.length} request(s)`);

if (engine === "checkpoint-manager") {
  const gauge = requests.some((r) =>
    (r.body?.messages ?? []).some((m) => m.role !== "system" && m.role !== "developer" && /\[Context: \d+% \| /.test(text(m))),
  );
  const restore = requests.some((r) => (r.body?.messages ?? []).some((m) => /\[Checkpoint [^\]]*: the context was compacted\./.test(text(m))));
  check(gauge, "the model saw checkpoint-manager's gauge note ([Context: N% | …]) among the messages (never the system prompt, which would break the cached prefix)");
  check(restore, "the model saw checkpoint-manager's checkpoint restore after the compaction");
  const states = files(join(home, "state", "checkpoint-manager"));
  check(states.length > 0, `checkpoint-manager kept state under state/checkpoint-manager (${states.length} files)`);
}
console.log(`  info last request: ${lastMessages.length} messages, system prompt ${system.length} chars`);

if (failures.length) {
  console.error(`e2e-openclaw: ${failures.length} check(s) failed for ${engine}`);
  process.exit(1);
}
