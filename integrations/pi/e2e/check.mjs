#!/usr/bin/env node
// Checks one engine's end-to-end run with pi (.ci/e2e-pi): what the fake model received, pi's
// session file, and ctxhost's mirror of the session.
//
//   node check.mjs --engine legacy --turns 4 --requests model-requests.jsonl \
//     --session-file <pi session .jsonl> --ctxhost-home DIR --turns-dir DIR
//
// Exits 1 naming every failed check.

import { join } from "node:path";
import { arg, check, failures, files, readJsonl, text } from "../../client/e2e/checks.mjs";

const engine = arg("engine");
const turns = Number(arg("turns"));
const requestsFile = arg("requests");
const sessionFile = arg("session-file");
const home = arg("ctxhost-home");

const marker = (/** @type {string | number} */ turn) => `E2E-${engine}-TURN-${turn}:`;
const endMarker = (/** @type {number} */ turn) => `END-OF-E2E-${engine}-TURN-${turn}`;
/** pi's own words around a compaction summary it shows the model (dist/core/messages.js). */
const PI_SUMMARY_PREFIX = "The conversation history before this point was compacted into the following summary:";
/** ctxhost's words around the summary it inserts. */
const CTXHOST_SUMMARY = /compacted\. Summary of it:/;

console.log(`e2e-pi: checks for ${engine} (${turns} turns, ${sessionFile})`);

// --- pi's session file ---------------------------------------------------------------------
const entries = readJsonl(sessionFile);
const header = entries[0];
check(header?.type === "session", `pi's session file starts with its header (version ${header?.version})`);
const compactions = entries.filter((e) => e.type === "compaction");
check(compactions.length >= 1, `pi wrote a compaction entry (${compactions.length})`);
const compaction = compactions[0];
check(compaction?.fromHook === true, "the compaction came from the extension (fromHook), not pi's summarizer");
check(
  typeof compaction?.details?.ctxhost?.engine === "string" && compaction.details.ctxhost.engine === engine,
  `its details name ctxhost's engine (${JSON.stringify(compaction?.details?.ctxhost)})`,
);
const ids = new Set(entries.map((e) => e.id));
check(ids.has(compaction?.firstKeptEntryId), `its firstKeptEntryId (${compaction?.firstKeptEntryId}) is an entry of the file`);
const keptAt = entries.findIndex((e) => e.id === compaction?.firstKeptEntryId);
check(
  keptAt > 0 && entries[keptAt].type === "message" && entries[keptAt].message.role !== "toolResult",
  `the first kept entry is a message pi may cut at (${entries[keptAt]?.message?.role})`,
);
const sessionId = header?.id;

// --- ctxhost's mirror ------------------------------------------------------------------------
const sessionFiles = files(join(home, "sessions"));
const key = `pi:${sessionId}`;
// The mirror itself, not the turn ledger (`<mirror>.ledger.jsonl`) beside it.
const mirrors = sessionFiles.filter((f) => f.endsWith(".jsonl") && !f.endsWith(".ledger.jsonl") && f.includes(encodeURIComponent(key)));
check(mirrors.length === 1, `one mirror file for ${key} (${mirrors.join(", ") || "none"})`);
const resets = sessionFiles.filter((f) => f.includes(encodeURIComponent(key)) && /\.(reset|torn)-/.test(f));
check(resets.length === 0, `the mirror was never reset or torn (${resets.join(", ") || "no .reset-/.torn- files"})`);
const mirror = mirrors.length === 1 ? readJsonl(mirrors[0]) : [];
const mirrored = mirror.filter((e) => e.type === "message").map((e) => e.message);
for (let turn = 1; turn <= turns; turn++) {
  const n = mirrored.filter((m) => m?.role === "user" && text(m).includes(marker(turn))).length;
  check(n === 1, `turn ${turn}'s prompt is in the mirror exactly once (${n})`);
}
const piMessages = entries.filter((e) => e.type === "message").map((e) => e.message);
const lastWithCtxhost = piMessages.findLastIndex((m) => m.role === "user" && text(m).includes(`E2E-${engine}-CONTINUE`));
check(
  lastWithCtxhost >= 0 && mirrored.length === lastWithCtxhost + 2,
  `the mirror holds pi's messages up to the last turn with ctxhost, its reply included (${mirrored.length} of ${lastWithCtxhost + 2})`,
);
const mirrorCompactions = mirror.filter((e) => e.type === "compaction");
check(mirrorCompactions.length >= 1, `ctxhost compacted its mirror (${mirrorCompactions.length})`);
check(
  mirrorCompactions.some((c) => typeof c.summary === "string" && compaction && c.summary.includes(compaction.summary.slice(0, 60))),
  "pi's compaction summary is ctxhost's",
);
check(mirrored.some((m) => m.role === "toolResult" && text(m).includes(`E2E-NOTES-${engine}`)), "the read tool's result reached the mirror");

// --- what the model saw ----------------------------------------------------------------------
const requests = readJsonl(requestsFile).filter((r) => JSON.stringify(r.body?.messages ?? []).includes(`E2E-${engine}-`));
const summarizer = requests.filter((r) =>
  (r.body?.messages ?? []).some((m) => /context summarization assistant|Create a structured context checkpoint summary/.test(text(m))),
);
check(summarizer.length === 0, `pi's own summarizer never called the model (${summarizer.length} request(s))`);
/** The requests of one prompt: its marker in a user message, no later prompt. @param {string} tag */
const requestsOf = (tag) =>
  requests.filter((r) => {
    const messages = r.body?.messages ?? [];
    const at = messages.findLastIndex((/** @type {any} */ m) => m.role === "user" && text(m).includes(tag));
    return at >= 0 && !messages.slice(at + 1).some((/** @type {any} */ m) => m.role === "user");
  });
for (let turn = 1; turn <= turns; turn++) {
  const rs = requestsOf(marker(turn));
  check(rs.length === (turn === 2 ? 2 : 1), `turn ${turn} reached the model (${rs.length} request(s): ${rs.map((r) => `${r.body.messages.length} msgs`).join(", ")})`);
}
const toolTurn = requestsOf(marker(2));
check(
  toolTurn.length === 2 && toolTurn[1].body.messages.some((/** @type {any} */ m) => m.role === "tool" && text(m).includes(`E2E-NOTES-${engine}`)),
  "the tool round: pi's second call of turn 2 carried the read result, through ctxhost's assembly",
);

const continued = requestsOf(`E2E-${engine}-CONTINUE`);
const plain = requestsOf(`E2E-${engine}-PLAIN-PI`);
check(continued.length === 1 && plain.length === 1, `the --continue turns reached the model (with ctxhost ${continued.length}, without ${plain.length})`);
const withCtxhost = continued[0]?.body?.messages ?? [];
const withoutCtxhost = plain[0]?.body?.messages ?? [];
const all = (/** @type {any[]} */ ms) => ms.map(text).join("\n");
/** The request's messages without the recall turn (its prompt names turn 1's end, its expand result holds turn 1). */
const outsideRecall = (/** @type {any[]} */ ms) =>
  all(ms.filter((m) => m.role !== "tool" && !text(m).includes("RECALL-PROBE")));
check(
  withCtxhost.some((m) => m.role === "user" && CTXHOST_SUMMARY.test(text(m))) && !all(withCtxhost).includes(PI_SUMMARY_PREFIX),
  "with ctxhost, after pi's restart, the model saw ctxhost's assembly: its summary as ctxhost words it, not pi's",
);
check(!outsideRecall(withCtxhost).includes(endMarker(1)), "turn 1's prompt is no longer in the model's context (compacted away)");
// pi alone builds from its latest compaction entry (a later turn may have compacted again).
const latest = compactions[compactions.length - 1];
check(
  all(withoutCtxhost).includes(PI_SUMMARY_PREFIX) && latest && all(withoutCtxhost).includes(latest.summary.slice(0, 60)),
  "pi alone reloads its compaction entry and shows the model ctxhost's summary in pi's own words",
);
check(!outsideRecall(withoutCtxhost).includes(endMarker(1)), "pi alone keeps from the same first entry: turn 1 stays out");

if (engine === "checkpoint-manager") {
  const gauge = requests.some((r) =>
    (r.body?.messages ?? []).some((/** @type {any} */ m) => m.role !== "system" && m.role !== "developer" && /\[Context: \d+% \| /.test(text(m))),
  );
  const restore = requests.some((r) => (r.body?.messages ?? []).some((/** @type {any} */ m) => /\[Checkpoint [^\]]*: the context was compacted\./.test(text(m))));
  check(gauge, "the model saw checkpoint-manager's gauge note ([Context: N% | …]) among the messages (never the system prompt, which would break the cached prefix)");
  check(restore, "the model saw checkpoint-manager's checkpoint restore after the compaction");
  const noGauge = !withoutCtxhost.some((m) => /\[Context: \d+% \| /.test(text(m)));
  check(noGauge, "without ctxhost, no gauge");
}
console.log(`  info the request after the restart: ${withCtxhost.length} messages with ctxhost, ${withoutCtxhost.length} without`);

if (failures.length) {
  console.error(`e2e-pi: ${failures.length} check(s) failed for ${engine}`);
  process.exit(1);
}
