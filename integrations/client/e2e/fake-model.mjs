#!/usr/bin/env node
// A fake OpenAI-compatible model server for the end-to-end runs (.ci/e2e-openclaw, .ci/e2e-pi):
// 127.0.0.1 on a random port, `POST /v1/chat/completions` answered with SSE (stream: true) or one
// JSON body, `GET /v1/models`. Every request body is appended as one JSON line to the record
// file, so the run can check what the model saw. Bounded: it answers at most --max-requests
// completions (later ones get 503) and exits after --max-seconds, whatever happens.
//
//   node fake-model.mjs --port-file F --record F [--max-requests 200] [--max-seconds 600]
//
// Replies are plain text: "fake reply #N" followed by filler, so each turn adds a predictable
// amount to the history. Two scripted exceptions, decided by the pending prompt:
// - `RECALL-PROBE query="<words>"`, with `ctx_search` offered: the model calls `ctx_search` with
//   those words among user messages, then `ctx_expand` on the first hit marked compacted (else
//   the first hit), then answers in text;
// - `TOOL-PROBE tool="<name>" args=<JSON object>` (to the end of its line): the model calls that
//   tool once with those arguments, then answers in text.
// Each step is read from what follows the prompt in the request (tool-call ids are rewritten by
// runtimes, so positions count, not ids), and a probe calls at most two tools: it cannot loop.

import { appendFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";

const args = process.argv.slice(2);
/** @param {string} name @param {string} [fallback] */
const arg = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const portFile = arg("port-file");
const record = arg("record");
const maxRequests = Number(arg("max-requests", "200"));
const maxSeconds = Number(arg("max-seconds", "600"));
const replyChars = Number(arg("reply-chars", "400"));
if (!portFile || !record) {
  process.stderr.write("usage: fake-model.mjs --port-file F --record F [--max-requests N] [--max-seconds S]\n");
  process.exit(2);
}
writeFileSync(record, "");

let completions = 0;

/** @param {any} body */
function promptTokens(body) {
  return Math.ceil(JSON.stringify(body?.messages ?? []).length / 4);
}

/** The text of a chat-completions message (a string or parts). @param {any} m */
function textOf(m) {
  if (typeof m?.content === "string") return m.content;
  if (Array.isArray(m?.content)) return m.content.map((p) => (typeof p?.text === "string" ? p.text : "")).join("\n");
  return "";
}

/**
 * The next step of a scripted probe (recall or tool) for this request, or null when it is none.
 * @param {any} body
 * @returns {{ tool: string, args: Record<string, unknown> } | { text: string } | null}
 */
function scriptedStep(body) {
  const messages = body?.messages ?? [];
  // The prompt: the last user message holding the probe (a runtime may add user messages of its
  // own after it, such as OpenClaw's internal context block).
  let last = -1;
  messages.forEach((m, i) => {
    if (m.role === "user" && /RECALL-PROBE|TOOL-PROBE/.test(textOf(m))) last = i;
  });
  if (last < 0) return null;
  const later = messages.slice(last + 1);
  // A newer prompt (a user message that is not a runtime's own context block) makes the probe history.
  if (later.some((m) => m.role === "user" && !textOf(m).startsWith("<<<"))) return null;
  const offered = new Set((body.tools ?? []).map((t) => t?.function?.name ?? t?.name));
  const results = later.filter((m) => m.role === "tool");
  const single = /TOOL-PROBE tool="([^"]+)" args=(\{.*\})/.exec(textOf(messages[last]));
  if (single) {
    if (results.length > 0) return { text: `tool probe done: ${single[1]} answered ${textOf(results[0]).length} characters.` };
    if (!offered.has(single[1])) return { text: `tool probe: ${single[1]} is not among the offered tools (${[...offered].join(", ") || "none"})` };
    return { tool: single[1], args: JSON.parse(single[2]) };
  }
  const probe = /RECALL-PROBE query="([^"]+)"/.exec(textOf(messages[last]));
  if (!probe) return null;
  if (results.length === 0) {
    if (!offered.has("ctx_search")) return { text: `recall probe: ctx_search is not among the offered tools (${[...offered].join(", ") || "none"})` };
    return { tool: "ctx_search", args: { query: probe[1], role: "user" } };
  }
  if (results.length === 1) {
    const hits = textOf(results[0]).split("\n").filter((l) => /^- \S+ · /.test(l));
    const pick = hits.find((l) => / · compacted/.test(l)) ?? hits[0];
    if (!pick) return { text: `recall probe: ctx_search found nothing: ${textOf(results[0]).slice(0, 300)}` };
    return { tool: "ctx_expand", args: { id: /^- (\S+) · /.exec(pick)[1], maxTokens: 4000 } };
  }
  return { text: `recall probe done: read ${textOf(results[results.length - 1]).length} characters of earlier messages.` };
}

/** @param {number} n */
function replyText(n) {
  const head = `fake reply #${n}.`;
  const filler = " The fake model acknowledges the request and has nothing else to add.";
  let text = head;
  while (text.length < replyChars) text += filler;
  return text;
}

/**
 * @param {import("node:http").ServerResponse} res
 * @param {number} status
 * @param {unknown} body
 */
function json(res, status, body) {
  const data = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(data) });
  res.end(data);
}

const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    if (req.method === "GET" && url.pathname.endsWith("/models")) {
      json(res, 200, { object: "list", data: [{ id: "fake-model", object: "model", owned_by: "fake" }] });
      return;
    }
    if (req.method !== "POST" || !url.pathname.endsWith("/chat/completions")) {
      json(res, 404, { error: { message: `no route ${req.method} ${url.pathname}` } });
      return;
    }
    const raw = Buffer.concat(chunks).toString("utf8");
    let body;
    try {
      body = JSON.parse(raw);
    } catch {
      json(res, 400, { error: { message: "body is not JSON" } });
      return;
    }
    completions += 1;
    const n = completions;
    appendFileSync(record, `${JSON.stringify({ n, at: Date.now(), body })}\n`);
    if (n > maxRequests) {
      json(res, 503, { error: { message: `fake model: more than ${maxRequests} requests` } });
      return;
    }
    const step = scriptedStep(body);
    const call = step && "tool" in step ? step : null;
    const text = step && "text" in step ? `fake reply #${n}: ${step.text}` : call ? "" : replyText(n);
    const usage = {
      prompt_tokens: promptTokens(body),
      completion_tokens: Math.ceil(text.length / 4),
      total_tokens: promptTokens(body) + Math.ceil(text.length / 4),
    };
    const id = `chatcmpl-fake-${n}`;
    const created = Math.floor(Date.now() / 1000);
    const model = body.model ?? "fake-model";
    const toolCall = call && {
      id: `call_${call.tool}_${n}`,
      type: "function",
      function: { name: call.tool, arguments: JSON.stringify(call.args) },
    };
    if (!body.stream) {
      const message = toolCall ? { role: "assistant", content: null, tool_calls: [toolCall] } : { role: "assistant", content: text };
      json(res, 200, {
        id,
        object: "chat.completion",
        created,
        model,
        choices: [{ index: 0, message, finish_reason: toolCall ? "tool_calls" : "stop" }],
        usage,
      });
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    const send = (/** @type {unknown} */ chunk) => res.write(`data: ${JSON.stringify(chunk)}\n\n`);
    const base = { id, object: "chat.completion.chunk", created, model };
    send({ ...base, choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] });
    for (let i = 0; i < text.length; i += 120) {
      send({ ...base, choices: [{ index: 0, delta: { content: text.slice(i, i + 120) }, finish_reason: null }] });
    }
    if (toolCall) send({ ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, ...toolCall }] }, finish_reason: null }] });
    send({ ...base, choices: [{ index: 0, delta: {}, finish_reason: toolCall ? "tool_calls" : "stop" }] });
    if (body.stream_options?.include_usage) send({ ...base, choices: [], usage });
    res.end("data: [DONE]\n\n");
  });
});

server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  writeFileSync(portFile, String(port));
  process.stderr.write(`fake model listening on 127.0.0.1:${port}\n`);
});

const stop = setTimeout(() => {
  process.stderr.write(`fake model: ${maxSeconds}s are up, exiting\n`);
  process.exit(0);
}, maxSeconds * 1000);
stop.unref();
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    server.close();
    process.exit(0);
  });
}
