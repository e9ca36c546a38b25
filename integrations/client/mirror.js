// What both integrations do with ctxhost's mirror (docs/serve-protocol.md, "Sessions and the
// mirror transcript"): bring it in step with the client's history in bounded `session.sync`
// requests, and turn an assemble plan (`items`) back into messages.

import { fingerprint } from "./fingerprint.js";

/** @typedef {Record<string, any>} AgentMessage */

/** Requests of one sync call stay well under the server's line cap (16 MiB by default). */
export const SYNC_CHUNK_BYTES = 4 * 1024 * 1024;

/**
 * Whether ctxhost inserted this message (a compaction summary, a checkpoint restore).
 * @param {AgentMessage} message
 */
export function isInserted(message) {
  return message?.__ctxhost?.inserted === true;
}

/**
 * Gives inserted messages that lack one the timestamp of their nearest neighbour (the next
 * message, else the previous, else now): runtimes print a message's time, and a missing one
 * shows the model "1970-01-01".
 * @param {AgentMessage[]} messages
 * @returns {AgentMessage[]}
 */
export function withTimestamps(messages) {
  const has = (/** @type {AgentMessage | undefined} */ m) => typeof m?.timestamp === "number" && m.timestamp > 0;
  return messages.map((m, i) => {
    if (!isInserted(m) || has(m)) return m;
    const next = messages.slice(i + 1).find(has);
    const previous = messages.slice(0, i).reverse().find(has);
    return { ...m, timestamp: (next ?? previous)?.timestamp ?? Date.now() };
  });
}

/**
 * The message array an assemble plan stands for: `{index}` and `{from, to}` are the client's
 * own messages (the same objects), `{message}` (with or without `replaces`) what the engine
 * inserted or rewrote.
 * @param {readonly AgentMessage[]} messages the client's history, positions as in the mirror
 * @param {readonly any[]} items
 * @returns {AgentMessage[]}
 */
export function fromItems(messages, items) {
  return items.flatMap((item, i) => {
    const position = (/** @type {unknown} */ n) => {
      if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n >= messages.length) {
        throw new Error(`items[${i}] refers to message ${n} of ${messages.length}`);
      }
      return n;
    };
    if (item && typeof item.index === "number") return [messages[position(item.index)]];
    if (item && typeof item.from === "number" && typeof item.to === "number") {
      const from = position(item.from);
      const to = position(item.to);
      if (to < from) throw new Error(`items[${i}] is a run from ${from} back to ${to}`);
      return messages.slice(from, to + 1);
    }
    if (item && item.message && typeof item.message === "object") return [item.message];
    throw new Error(`items[${i}] is none of {index}, {from, to} or {message}`);
  });
}

/**
 * The text of an inserted compaction summary, without the words ctxhost wraps it in for the
 * model ("… Summary of it:\n\n<summary>\n…\n</summary>"): what a runtime stores as its own
 * compaction's summary and wraps in its own words.
 * @param {AgentMessage} message
 * @returns {string}
 */
export function summaryText(message) {
  const content = message?.content;
  const text =
    typeof content === "string"
      ? content
      : Array.isArray(content)
        ? content.map((/** @type {any} */ c) => (typeof c?.text === "string" ? c.text : "")).join("\n")
        : typeof message?.summary === "string"
          ? message.summary
          : "";
  const inner = /<summary>\n?([\s\S]*?)\n?<\/summary>/.exec(text);
  return (inner ? inner[1] : text).trim();
}

/**
 * Sends `messages[from..]` to the mirror with `session.sync`, in requests of at most
 * `SYNC_CHUNK_BYTES` (or half the server's line cap), each with its messages' fingerprints (the
 * server chains them); with `reset`, the first request replaces the mirror (the server keeps
 * the old file) and `from` must be 0.
 * @param {(method: string, params: Record<string, unknown>) => Promise<any>} call
 * @param {{ sessionKey: string, messages: readonly AgentMessage[], from: number, reset?: boolean,
 *   fingerprintOf?: (i: number) => string, maxLineBytes?: number }} opts
 * @returns {Promise<number>} the sync requests sent
 */
export async function syncMirror(call, opts) {
  const { sessionKey, messages } = opts;
  const fp = opts.fingerprintOf ?? ((/** @type {number} */ i) => fingerprint(messages[i]));
  const limit = Math.min(SYNC_CHUNK_BYTES, Math.floor((opts.maxLineBytes ?? 16 << 20) / 2));
  let reset = opts.reset === true;
  let start = opts.from;
  let requests = 0;
  while (start < messages.length || reset) {
    let end = start;
    let bytes = 0;
    while (end < messages.length) {
      const size = Buffer.byteLength(JSON.stringify(messages[end]));
      if (end > start && bytes + size > limit) break;
      bytes += size;
      end += 1;
    }
    /** @type {Record<string, unknown>} */
    const params = { sessionKey, from: start, messages: messages.slice(start, end) };
    if (end > start) {
      params.fingerprints = Array.from({ length: end - start }, (_, i) => fp(start + i));
      params.lastFingerprint = params.fingerprints.at(-1);
    }
    if (reset) params.reset = true;
    await call("session.sync", params);
    requests += 1;
    reset = false;
    start = end;
  }
  return requests;
}
