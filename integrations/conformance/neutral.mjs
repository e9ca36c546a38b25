// The neutral form the three agents' records are compared in (see README.md):
//
// - A driver records, for every model call, the messages the model would get, each as
//   `{ role, text, toolCallId?, toolCalls?, inserted? }` read from that agent's own message shape,
//   and at the end the text of each ctx_search answer.
// - Here a kept message becomes `m<position>`, its position in the fixture, found by its content
//   (role, text, tool call ids). That mapping is faithful because every fixture message's content
//   is distinct (load() checks it), and a bridge hands back the agent's own message for a kept
//   position, so its content is the fixture's exactly: a message a bridge changed finds no
//   position and shows up as `unknown` instead of passing for another.
// - Text ctxhost wrote (a summary, a search answer) names mirror entries by random 8-hex ids and
//   carries the time each entry was written: ids become `<m<position>>` (or `<compaction#n>`…)
//   through the agent's own mirror file, and so do entry numbers (lossless writes "entries
//   3–17": positions in the mirror file, whose bookkeeping entries differ by bridge); times
//   become `<time>`. checkpoint-manager's restore names its checkpoint and the session key
//   (`[Checkpoint cp_007 of pi:…,`): the key is each agent's own, and the number counts the
//   agent's processes (each instance that ends writes one), so both become placeholders.
//   Its gauge notes (`[Context: 70% | …]`) are left out: a note reads the request the agent
//   sends at that hook (pi sends its pending prompt among the entries, OpenClaw does not, and
//   Hermes has no hook before a model call), so where and what they read differs by design.
//   Nothing else is rewritten.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { files, readJsonl } from "../client/test-support/common.js";

/** @typedef {{ role: string, text: string, toolCallId?: string, toolCalls?: string[], inserted?: string }} Item */
/** @typedef {{ turn: number, call: number, messages: Item[] }} ModelCall */
/** @typedef {{ agent: string, home: string, calls: ModelCall[], recall: { query: string, text: string }[] }} RawRecord */

/**
 * The fixture, every message's content checked distinct.
 * @param {string} path
 */
export function load(path) {
  const fixture = JSON.parse(readFileSync(path, "utf8"));
  fixtureIndex(fixture);
  return fixture;
}

/** @param {Item} item */
function contentKey(item) {
  return JSON.stringify([item.role, item.text, item.toolCallId ?? null, item.toolCalls ?? []]);
}

/**
 * A fixture message as an Item (its neutral content).
 * @param {any} m
 * @returns {Item}
 */
export function fixtureItem(m) {
  /** @type {Item} */
  const item = { role: m.role, text: m.text };
  if (m.toolCallId) item.toolCallId = m.toolCallId;
  if (m.toolCalls?.length) item.toolCalls = m.toolCalls.map((/** @type {any} */ c) => c.id);
  return item;
}

/**
 * Content key → position of each fixture message, in order across turns.
 * @param {any} fixture
 */
function fixtureIndex(fixture) {
  /** @type {Map<string, number>} */
  const index = new Map();
  let position = 0;
  for (const [t, turn] of fixture.turns.entries()) {
    for (const m of turn.messages) {
      const key = contentKey(fixtureItem(m));
      if (index.has(key)) throw new Error(`fixture: turn ${t} repeats message ${index.get(key)} (${m.role}): a kept message could not be told apart`);
      index.set(key, position++);
    }
  }
  return index;
}

/** The text of an AgentMessage: a string content, or its text parts joined. @param {any} m */
export function agentText(m) {
  if (typeof m?.content === "string") return m.content;
  if (Array.isArray(m?.content)) return m.content.filter((/** @type {any} */ c) => c?.type === "text").map((/** @type {any} */ c) => c.text).join("\n");
  if (typeof m?.summary === "string") return m.summary;
  return "";
}

/**
 * An AgentMessage (OpenClaw's and pi's shape, and the mirror's) as an Item.
 * @param {any} m
 * @returns {Item}
 */
export function agentItem(m) {
  /** @type {Item} */
  const item = { role: m.role, text: agentText(m) };
  if (typeof m.toolCallId === "string") item.toolCallId = m.toolCallId;
  const calls = Array.isArray(m.content) ? m.content.filter((/** @type {any} */ c) => c?.type === "toolCall").map((/** @type {any} */ c) => c.id) : [];
  if (calls.length) item.toolCalls = calls;
  if (m.__ctxhost?.inserted === true) item.inserted = m.__ctxhost.kind ?? "inserted";
  return item;
}

/**
 * The mirror transcript of the one session under `home`.
 * @param {string} home
 */
export function mirrorFile(home) {
  const found = files(join(home, "sessions")).filter((f) => f.endsWith(".jsonl") && !/\.ledger(\.\d+)?\.jsonl$/.test(f));
  if (found.length !== 1) throw new Error(`expected one mirror under ${home}/sessions, found ${found.length}: ${found.join(", ")}`);
  return found[0];
}

/**
 * The neutral label of each mirror entry, by id and by number (its place after the header):
 * `m<position>` for a message of the fixture, `<type>#<n>` for anything else (the n-th entry of
 * that type).
 * @param {string} mirror
 * @param {Map<string, number>} index
 */
function entryLabels(mirror, index) {
  /** @type {Map<string, string>} */
  const byId = new Map();
  /** @type {string[]} */
  const byNumber = [];
  /** @type {Map<string, number>} */
  const seen = new Map();
  for (const entry of readJsonl(mirror)) {
    if (typeof entry.id !== "string" || entry.type === "session") continue;
    const position = entry.type === "message" ? index.get(contentKey(agentItem(entry.message))) : undefined;
    let label = `m${position}`;
    if (position === undefined) {
      const kind = entry.type === "message" ? `message:${entry.message?.role}` : entry.type;
      const n = seen.get(kind) ?? 0;
      seen.set(kind, n + 1);
      label = `${kind}#${n}`;
    }
    byId.set(entry.id, label);
    byNumber.push(label);
  }
  return { byId, byNumber };
}

const ISO_TIME = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z/g;
const ENTRY_ID = /\b[0-9a-f]{8}\b/g;
const ENTRY_NUMBERS = /\bentries (\d+)–(\d+)/g;
const CHECKPOINT = /\[Checkpoint cp_\d+ of [^,\s]+,/g;
const GAUGE_NOTE = /^\[Context: \d+%/;

/**
 * @param {string} text
 * @param {ReturnType<typeof entryLabels>} labels
 */
function normalized(text, labels) {
  const number = (/** @type {string} */ n) => `<${labels.byNumber[Number(n)] ?? `entry ${n}`}>`;
  return text
    .replace(ENTRY_ID, (id) => (labels.byId.has(id) ? `<${labels.byId.get(id)}>` : id))
    .replace(ENTRY_NUMBERS, (_, a, b) => `entries ${number(a)}–${number(b)}`)
    .replace(ISO_TIME, "<time>")
    .replace(CHECKPOINT, "[Checkpoint <checkpoint> of <session>,");
}

/**
 * A driver's record in the neutral form.
 * @param {RawRecord} record
 * @param {any} fixture
 */
export function neutral(record, fixture) {
  const index = fixtureIndex(fixture);
  const labels = entryLabels(mirrorFile(record.home), index);
  const item = (/** @type {Item} */ it) => {
    if (it.inserted) return { inserted: it.inserted, text: normalized(it.text, labels) };
    const position = index.get(contentKey(it));
    return position !== undefined ? `m${position}` : { unknown: it.role, text: normalized(it.text, labels) };
  };
  return {
    calls: record.calls.map((c) => ({
      turn: c.turn,
      call: c.call,
      context: c.messages.filter((m) => !(m.inserted && GAUGE_NOTE.test(m.text))).map(item),
    })),
    recall: record.recall.map((r) => ({ query: r.query, answer: normalized(r.text, labels) })),
  };
}

/**
 * Two values as JSON, cut to the neighbourhood of their first differing character (a summary
 * may differ in one word of several hundred).
 * @param {unknown} x
 * @param {unknown} y
 */
function contrast(x, y) {
  const sx = JSON.stringify(x) ?? "nothing";
  const sy = JSON.stringify(y) ?? "nothing";
  let i = 0;
  while (i < sx.length && sx[i] === sy[i]) i++;
  const from = Math.max(0, i - 80);
  const cut = (/** @type {string} */ s) => `${from > 0 ? "…" : ""}${s.slice(from, i + 160)}${s.length > i + 160 ? "…" : ""}`;
  return [cut(sx), cut(sy)];
}

/**
 * The first place where two neutral records differ, said in words, or null when they are equal.
 * @param {string} a the first agent's name
 * @param {ReturnType<typeof neutral>} ra
 * @param {string} b
 * @param {ReturnType<typeof neutral>} rb
 */
export function firstDifference(a, ra, b, rb) {
  const calls = Math.max(ra.calls.length, rb.calls.length);
  for (let i = 0; i < calls; i++) {
    const ca = ra.calls[i];
    const cb = rb.calls[i];
    if (!ca || !cb || ca.turn !== cb.turn || ca.call !== cb.call) {
      return `model call ${i}: ${a} has ${ca ? `turn ${ca.turn} call ${ca.call}` : "none"}, ${b} has ${cb ? `turn ${cb.turn} call ${cb.call}` : "none"}`;
    }
    const where = `turn ${ca.turn}, model call ${ca.call}`;
    const n = Math.max(ca.context.length, cb.context.length);
    for (let j = 0; j < n; j++) {
      if (JSON.stringify(ca.context[j]) !== JSON.stringify(cb.context[j])) {
        const [x, y] = contrast(ca.context[j], cb.context[j]);
        return `${where}, context[${j}] (of ${ca.context.length} / ${cb.context.length}): ${a} has ${x}, ${b} has ${y}`;
      }
    }
  }
  const queries = Math.max(ra.recall.length, rb.recall.length);
  for (let i = 0; i < queries; i++) {
    if (JSON.stringify(ra.recall[i]) !== JSON.stringify(rb.recall[i])) {
      const [x, y] = contrast(ra.recall[i]?.answer, rb.recall[i]?.answer);
      return `ctx_search ${JSON.stringify(ra.recall[i]?.query ?? rb.recall[i]?.query)}: ${a} answered ${x}, ${b} answered ${y}`;
    }
  }
  return null;
}

/**
 * The model calls of one fixture turn, as every driver makes them: one before each assistant
 * message, its context holding the turn's messages before it (the prompt first).
 * @param {any} turn
 * @returns {number[]} for each call, how many of the turn's messages its context holds
 */
export function callPoints(turn) {
  return turn.messages.flatMap((/** @type {any} */ m, /** @type {number} */ i) => (m.role === "assistant" ? [i] : []));
}
