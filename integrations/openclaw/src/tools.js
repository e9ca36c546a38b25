// ctxhost's recall tools as OpenClaw agent tools: `ctx_search` and `ctx_expand` search and open
// this session's own earlier messages in ctxhost's mirror, those a compaction took out of the
// context included. Each call is `session.callTool` on the sidecar for the session key OpenClaw
// hands the tool factory.
//
// - OpenClaw's tool factory is synchronous and runs before any engine hook of a turn, so the
//   tools are declared here (names in openclaw.plugin.json's `contracts.tools`, or OpenClaw drops
//   them); the server remains the judge of the arguments (its -32602 names the field).
// - `catalogMode: "direct-only"`: the tools stay in the request's `tools` with their whole
//   description, instead of OpenClaw's default catalog (a ~60-character line in the prompt, then
//   `tool_describe` and `tool_call` round trips whose results come back wrapped). See README.md.
// - A call never throws (../client/tools.js): a dead, missing or wedged sidecar, an unknown
//   session that cannot be opened again, or a refused argument all come back as a text result
//   the model can read.
// - Engine tools (contract 0.3 engines) are not registered here: OpenClaw only accepts tools
//   whose names the manifest declares ahead of time, and an engine's tool names are not known
//   until its sidecar runs.

import { callSessionTool } from "../client/tools.js";

/**
 * The two tools, as this plugin offers them. The descriptions are written for OpenClaw's model:
 * their first words say what differs from OpenClaw's own `memory_search` (notes kept across
 * sessions) and `sessions_search` (other sessions), should a catalog cut them.
 */
export const RECALL_TOOLS = Object.freeze([
  Object.freeze({
    name: "ctx_search",
    label: "Search this conversation (ctxhost)",
    description:
      "Search THIS conversation's own earlier messages, including those compacted out of your context into a summary. " +
      "Returns matching entry ids with short snippets; open one with ctx_expand. Use it when a summary mentions " +
      "something you need exactly (a request, an error, a file, a decision). Not for notes or other sessions.",
    parameters: Object.freeze({
      type: "object",
      properties: {
        query: { type: "string", minLength: 1, maxLength: 1000, description: "Distinctive words to find: a file name, an error, a term the user used." },
        role: {
          type: "string",
          enum: ["user", "assistant", "toolResult", "bashExecution", "custom", "branchSummary", "compactionSummary"],
          description: "Only entries of this role.",
        },
        tool: { type: "string", description: "Only results of (and calls to) this tool." },
        isError: { type: "boolean", description: "Only failed (true) or successful (false) tool results." },
        after: { type: "string", description: "Only entries at or after this time (RFC 3339)." },
        before: { type: "string", description: "Only entries before this time (RFC 3339)." },
        limit: { type: "integer", minimum: 1, maximum: 50, description: "Hits to return (default 10)." },
      },
      required: ["query"],
      additionalProperties: false,
    }),
  }),
  Object.freeze({
    name: "ctx_expand",
    label: "Open earlier messages (ctxhost)",
    description:
      "Open the original text of THIS conversation's earlier messages: an entry id from ctx_search, a citation from a " +
      "compaction summary (#1a2b3c4d or #1a2b3c4d..#5e6f7a8b), or a range from/to. Long results stop at maxTokens " +
      "and name a cursor to continue with.",
    parameters: Object.freeze({
      type: "object",
      properties: {
        id: { type: "string", description: "An entry id or a summary's citation." },
        from: { type: "string", description: "First entry id of a range (with `to`)." },
        to: { type: "string", description: "Last entry id of a range (with `from`)." },
        cursor: { type: "string", description: "The cursor a cut expansion gave, to continue it." },
        maxTokens: { type: "integer", minimum: 100, maximum: 16000, description: "Cap on the text returned (default 2000)." },
      },
      additionalProperties: false,
    }),
  }),
]);

export const RECALL_TOOL_NAMES = Object.freeze(RECALL_TOOLS.map((t) => t.name));

/** @param {unknown} err */
function describe(err) {
  return err instanceof Error ? err.message : String(err);
}

/**
 * The OpenClaw tools for one run: OpenClaw calls this factory with the run's context.
 * @param {() => import("../client/sidecar.js").Sidecar} sidecarOf the bridge's sidecar (resolved per run)
 * @param {{ sessionKey?: string, sessionId?: string }} ctx OpenClaw's tool context
 */
export function openclawTools(sidecarOf, ctx) {
  const sessionKey = ctx?.sessionKey ?? ctx?.sessionId;
  return RECALL_TOOLS.map((tool) => ({
    name: tool.name,
    label: tool.label,
    description: tool.description,
    parameters: tool.parameters,
    catalogMode: /** @type {const} */ ("direct-only"),
    /**
     * @param {string} _toolCallId
     * @param {unknown} params
     * @param {AbortSignal} [signal]
     */
    async execute(_toolCallId, params, signal) {
      let answer;
      try {
        answer = await callSessionTool(sidecarOf(), sessionKey, tool.name, params, { signal });
      } catch (err) {
        // The bridge itself could not be built (a bad plugin config): still an answer, not a throw.
        answer = { text: `${tool.name} could not run: ${describe(err)}`, isError: true };
      }
      return {
        content: [{ type: "text", text: answer.text }],
        details: { status: answer.isError ? "error" : "ok", source: "ctxhost", ...(answer.details ? { result: answer.details } : {}) },
      };
    },
  }));
}
