#!/usr/bin/env node
// Checks one engine's recall turn of an end-to-end run (.ci/e2e-openclaw, .ci/e2e-pi): after
// ctxhost compacted the session, the fake model (fake-model.mjs, "recall probe") called
// ctx_search, then ctx_expand on a compacted hit, and the expand result it received holds the
// original text of a message that was no longer in its context.
//
//   node check-recall.mjs --engine legacy --requests model-requests.jsonl --turns 4
//
// Exits 1 naming every failed check.

import { arg, check, failures, readJsonl, text } from "./checks.mjs";

const engine = arg("engine");
const requestsFile = arg("requests");
const turns = Number(arg("turns"));

const endMarker = (/** @type {number} */ turn) => `END-OF-E2E-${engine}-TURN-${turn}`;
const tag = `E2E-${engine}-RECALL`;

console.log(`e2e: recall checks for ${engine}`);
const requests = readJsonl(requestsFile);
// The recall turn's requests: those holding its prompt and no newer prompt (a runtime may add
// user messages of its own after the prompt, such as OpenClaw's internal context block).
const recall = requests.filter((r) => {
  const messages = r.body?.messages ?? [];
  const at = messages.findLastIndex((/** @type {any} */ m) => m.role === "user" && text(m).includes(tag));
  return at >= 0 && !messages.slice(at + 1).some((/** @type {any} */ m) => m.role === "user" && !text(m).startsWith("<<<"));
});
check(recall.length === 3, `the recall turn made 3 model requests: search, expand, answer (${recall.length})`);
const [first, second, third] = recall;

const tools = (first?.body?.tools ?? []).map((t) => t?.function?.name ?? t?.name);
check(
  tools.includes("ctx_search") && tools.includes("ctx_expand"),
  `ctx_search and ctx_expand are offered directly in the request's tools (${tools.length} tools offered)`,
);
const own = (first?.body?.tools ?? []).filter((t) => ["ctx_search", "ctx_expand"].includes(t?.function?.name));
const ownBytes = JSON.stringify(own).length;
console.log(`  info the two tool definitions take ${ownBytes} bytes (~${Math.ceil(ownBytes / 4)} tokens) of each request`);
check(
  own.every((t) => typeof t.function.description === "string" && t.function.description.length > 80),
  "the model got their whole descriptions, not a catalog line",
);

/** The messages after the pending prompt. @param {any} r */
const afterPrompt = (r) => {
  const messages = r?.body?.messages ?? [];
  let last = -1;
  messages.forEach((/** @type {any} */ m, /** @type {number} */ i) => {
    if (m.role === "user" && text(m).includes(tag)) last = i;
  });
  return messages.slice(last + 1);
};
const calledTools = (/** @type {any} */ r) =>
  afterPrompt(r)
    .filter((m) => m.role === "assistant")
    .flatMap((m) => (m.tool_calls ?? []).map((/** @type {any} */ c) => c.function?.name));
const toolResults = (/** @type {any} */ r) => afterPrompt(r).filter((m) => m.role === "tool").map(text);

// What the model had before the probe: the request's messages, the probe's prompt left out (it
// names the text it looks for).
const before = (first?.body?.messages ?? [])
  .map(text)
  .filter((t) => !t.includes(tag))
  .join("\n");
const compacted = [];
for (let turn = 1; turn <= turns; turn++) if (!before.includes(endMarker(turn))) compacted.push(turn);
check(compacted.length > 0, `before the probe, turns compacted out of the model's context: ${compacted.join(", ") || "none"}`);

check(JSON.stringify(calledTools(second)) === JSON.stringify(["ctx_search"]), `the model called ctx_search first (${calledTools(second).join(", ")})`);
const searchText = toolResults(second)[0] ?? "";
const hits = searchText.split("\n").filter((l) => /^- \S+ · /.test(l));
check(hits.length > 0, `ctx_search answered hits with entry ids (${hits.length}: ${JSON.stringify(hits[0]?.slice(0, 80))})`);
check(hits.some((l) => / · compacted/.test(l)), "at least one hit is marked compacted");

check(
  JSON.stringify(calledTools(third)) === JSON.stringify(["ctx_search", "ctx_expand"]),
  `then ctx_expand (${calledTools(third).join(", ")})`,
);
const expandText = toolResults(third)[1] ?? "";
const recovered = compacted.filter((turn) => expandText.includes(endMarker(turn)));
check(
  recovered.length > 0,
  `ctx_expand returned the original text of a compacted message: ${recovered.map(endMarker).join(", ") || `none (${JSON.stringify(expandText.slice(0, 160))})`}`,
);
console.log(`  info the expand result the model read: ${expandText.length} characters`);

if (failures.length) {
  console.error(`e2e: ${failures.length} recall check(s) failed for ${engine}`);
  process.exit(1);
}
