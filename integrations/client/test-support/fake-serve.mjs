#!/usr/bin/env node
// A stand-in for `ctxhost serve` in client tests: newline-delimited JSON-RPC 2.0 on stdio,
// answering `initialize`, `session.bootstrap`, `session.close`, `session.tools`,
// `session.callTool` and `shutdown` the way docs/serve-protocol.md says, from a script of
// behaviours chosen by the environment. Used where the real binary cannot be made to reach a
// state on purpose (a crash in the middle of one particular call, a server without a method).
//
//   FAKE_SERVE_LOG=<file>   every request line is appended to it (the test reads what was sent)
//   FAKE_SERVE_MODE=<mode>  normal (default) | exit-on-call (exits when a session.callTool
//                           arrives, first process only; see FAKE_SERVE_ONCE) | hang-on-call
//                           (never answers session.callTool) | no-tools (session.tools and
//                           session.callTool are unknown methods, as in a server without recall)
//   FAKE_SERVE_ONCE=<file>  with exit-on-call: exit only if this file does not exist yet (it is
//                           created), so the restarted server answers
//   FAKE_SERVE_TOOLS=<json> the tools `session.tools` lists (default: ctx_search, ctx_expand)
//   FAKE_SERVE_PROTOCOL=<n> the protocolVersion `initialize` answers (default 1)

import { appendFileSync, existsSync, writeFileSync } from "node:fs";
import { createInterface } from "node:readline";

const mode = process.env.FAKE_SERVE_MODE ?? "normal";
const log = process.env.FAKE_SERVE_LOG;
const once = process.env.FAKE_SERVE_ONCE;
const tools = process.env.FAKE_SERVE_TOOLS
  ? JSON.parse(process.env.FAKE_SERVE_TOOLS)
  : [
      { name: "ctx_search", description: "search", parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] }, source: "host" },
      { name: "ctx_expand", description: "expand", parameters: { type: "object", properties: { id: { type: "string" } } }, source: "host" },
    ];
/** @type {Set<string>} */
const open = new Set();

/** @param {unknown} id @param {unknown} result */
const answer = (id, result) => process.stdout.write(`${JSON.stringify({ jsonrpc: "2.0", id, result })}\n`);
/** @param {unknown} id @param {number} code @param {string} message @param {unknown} [data] */
const fail = (id, code, message, data) =>
  process.stdout.write(`${JSON.stringify({ jsonrpc: "2.0", id, error: { code, message, ...(data === undefined ? {} : { data }) } })}\n`);

createInterface({ input: process.stdin }).on("line", (line) => {
  if (log) appendFileSync(log, `${line}\n`);
  const { id, method, params = {} } = JSON.parse(line);
  const key = params.sessionKey;
  const needSession = () => {
    if (open.has(key)) return true;
    fail(id, -32001, `session \`${key}\` is not open in this server; call session.bootstrap first`, { sessionKey: key });
    return false;
  };
  switch (method) {
    case "initialize":
      return answer(id, {
        protocolVersion: process.env.FAKE_SERVE_PROTOCOL ? Number(process.env.FAKE_SERVE_PROTOCOL) : 1,
        host: { name: "fake-serve", version: "0" },
        engine: { id: "fake", name: "Fake", version: "0", contract: "0.3.0", ownsCompaction: true },
        contextWindow: 8000,
        limits: { memoryBytes: 1 << 26, callTimeoutMs: 5000, hostBytesPerCall: 1 << 20, maxLineBytes: 1 << 24 },
      });
    case "session.bootstrap":
      open.add(key);
      return answer(id, { sessionKey: key, created: true, ephemeral: false, messageCount: 0, lastFingerprint: null, mirror: "/dev/null" });
    case "session.close":
      return answer(id, { closed: open.delete(key) });
    case "shutdown":
      answer(id, {});
      return process.exit(0);
    case "session.tools":
      if (mode === "no-tools") return fail(id, -32601, "unknown method `session.tools`", { method });
      if (!needSession()) return;
      return answer(id, { tools });
    case "session.callTool": {
      if (mode === "no-tools") return fail(id, -32601, "unknown method `session.callTool`", { method });
      if (mode === "exit-on-call" && (!once || !existsSync(once))) {
        if (once) writeFileSync(once, "");
        return process.exit(3);
      }
      if (mode === "hang-on-call") return;
      if (!needSession()) return;
      const tool = tools.find((t) => t.name === params.name);
      if (!tool) return fail(id, -32602, `session.callTool: unknown tool \`${params.name}\``, { path: "name" });
      const args = params.arguments ?? {};
      if (params.name === "ctx_search") {
        if (typeof args.query !== "string") {
          return fail(id, -32602, `ctx_search: arguments.query: invalid type: expected a string`, { path: "arguments.query" });
        }
        return answer(id, {
          content: `1 entries match ${JSON.stringify(args.query)}, best first:\n- e1a2b3c4 · user · compacted: ${args.query} was here\nOpen one with ctx_expand {"id": "<id>"}.`,
          isError: false,
        });
      }
      if (params.name === "ctx_expand") {
        if (args.id === "unknown") return answer(id, { content: "no entry `unknown` in this conversation", isError: true });
        return answer(id, { content: `[user] the original text of ${args.id}`, isError: false });
      }
      return answer(id, { content: `${params.name} ran with ${JSON.stringify(args)}`, isError: false });
    }
    default:
      return fail(id, -32601, `unknown method \`${method}\``, { method });
  }
});
