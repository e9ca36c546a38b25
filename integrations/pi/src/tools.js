// The session's agent tools as pi tools: ctxhost's recall tools (`ctx_search`, `ctx_expand`)
// and the engine's own (contract 0.3 engines), as `session.tools` lists them, each call a
// `session.callTool`. pi accepts tools at any time (they join the running session at once), so
// they are registered when the session opens, with the server's names, descriptions and JSON
// Schemas (pi validates arguments against a plain JSON Schema too).
//
// A failed call is thrown, which is how pi marks a tool result as an error for the model; pi's
// agent loop catches it, so a dead or missing sidecar costs the model one error result, never
// the turn.

import { callSessionTool } from "../client/tools.js";

/**
 * @typedef {object} SessionTool
 * @property {string} name
 * @property {string} description
 * @property {Record<string, unknown>} parameters
 * @property {"host" | "engine"} [source]
 */

/** One line for pi's "Available tools" list: the description's first sentence. @param {string} description */
export function snippetOf(description) {
  const first = /^[\s\S]*?[.!?](\s|$)/.exec(description)?.[0] ?? description;
  return first.trim().slice(0, 200);
}

/**
 * The pi tool definition for one session tool.
 * @param {SessionTool} tool
 * @param {() => { sidecar: import("../client/sidecar.js").Sidecar, key: string } | null} current
 *   the session the call is for (read at call time: pi may have moved to another session)
 */
export function piTool(tool, current) {
  /** @type {string[]} */
  const guidelines = [];
  if (tool.name === "ctx_search") {
    guidelines.push(
      "Use ctx_search when a compaction summary mentions something you need word for word (a request, an error, a file, a decision); open its hits with ctx_expand.",
    );
  }
  return {
    name: tool.name,
    label: tool.source === "engine" ? `${tool.name} (ctxhost engine)` : `${tool.name} (ctxhost)`,
    description: tool.description,
    promptSnippet: snippetOf(tool.description),
    ...(guidelines.length ? { promptGuidelines: guidelines } : {}),
    parameters: tool.parameters,
    /**
     * @param {string} _toolCallId
     * @param {unknown} params
     * @param {AbortSignal} [signal]
     */
    async execute(_toolCallId, params, signal) {
      const session = current();
      const answer = session
        ? await callSessionTool(session.sidecar, session.key, tool.name, params, { signal })
        : { text: `${tool.name} cannot run: no pi session is open`, isError: true, details: undefined };
      if (answer.isError) throw new Error(answer.text);
      return {
        content: [{ type: "text", text: answer.text }],
        details: { source: tool.source ?? "host", ...(answer.details !== undefined ? { result: answer.details } : {}) },
      };
    },
  };
}

/**
 * Registers the session's tools that are not registered yet. An engine tool whose name is
 * already one of pi's (a built-in such as `read`, or another extension's) is left out with a
 * warning: it would replace that tool.
 * @param {{ registerTool: (tool: any) => void, getAllTools?: () => { name: string }[] }} pi
 * @param {SessionTool[]} tools
 * @param {Set<string>} registered names this extension registered (updated)
 * @param {() => { sidecar: import("../client/sidecar.js").Sidecar, key: string } | null} current
 * @param {(message: string) => void} warn
 * @returns {string[]} the names registered now
 */
export function registerTools(pi, tools, registered, current, warn) {
  const taken = new Set((pi.getAllTools?.() ?? []).map((t) => t.name).filter((n) => !registered.has(n)));
  /** @type {string[]} */
  const added = [];
  for (const tool of tools) {
    if (!tool || typeof tool.name !== "string" || registered.has(tool.name)) continue;
    if (taken.has(tool.name)) {
      warn(`ctxhost: the engine's tool ${tool.name} is not registered: pi already has a tool of that name`);
      continue;
    }
    pi.registerTool(piTool(tool, current));
    registered.add(tool.name);
    added.push(tool.name);
  }
  return added;
}
