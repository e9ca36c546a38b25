#!/usr/bin/env node
// A fake OpenAI-compatible model server for the end-to-end run (.ci/e2e-openclaw): 127.0.0.1 on
// a random port, `POST /v1/chat/completions` answered with SSE (stream: true) or one JSON body,
// `GET /v1/models`. Every request body is appended as one JSON line to the record file, so the
// run can check what the model saw. Bounded: it answers at most --max-requests completions
// (later ones get 503) and exits after --max-seconds, whatever happens.
//
//   node fake-model.mjs --port-file F --record F [--max-requests 200] [--max-seconds 600]
//
// Replies are plain text (never tool calls, which would make an agent loop): "fake reply #N"
// followed by filler, so each turn adds a predictable amount to the history.

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
    const text = replyText(n);
    const usage = {
      prompt_tokens: promptTokens(body),
      completion_tokens: Math.ceil(text.length / 4),
      total_tokens: promptTokens(body) + Math.ceil(text.length / 4),
    };
    const id = `chatcmpl-fake-${n}`;
    const created = Math.floor(Date.now() / 1000);
    const model = body.model ?? "fake-model";
    if (!body.stream) {
      json(res, 200, {
        id,
        object: "chat.completion",
        created,
        model,
        choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
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
    send({ ...base, choices: [{ index: 0, delta: {}, finish_reason: "stop" }] });
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
