// Calling a session's agent tools (`session.tools` lists them, `session.callTool` runs one;
// docs/serve-protocol.md) from a runtime's tool implementation. A call never throws: whatever
// goes wrong (the sidecar is missing, dies, hangs; the session is unknown after a restart and
// cannot be opened; the server refuses the arguments) comes back as an error answer whose text
// the model can read. Both integrations use it: OpenClaw returns the answer as the tool's
// result, pi throws it (which is how pi marks a tool result as an error).

import { abortable } from "./abort.js";
import { codes, isRpcError, isSidecarError } from "./sidecar.js";

/** @typedef {{ text: string, isError: boolean, details?: unknown }} ToolAnswer */

/** @param {unknown} err */
function describe(err) {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Calls one session tool on the sidecar; never throws. When the server does not know the session
 * (it restarted) or died mid-call, the session is opened again and the call retried once.
 * @param {import("./sidecar.js").Sidecar} sidecar
 * @param {string | undefined} sessionKey
 * @param {string} name
 * @param {unknown} args the model's arguments
 * @param {{ signal?: AbortSignal }} [opts]
 * @returns {Promise<ToolAnswer>}
 */
export async function callSessionTool(sidecar, sessionKey, name, args, opts = {}) {
  if (!sessionKey) {
    return { text: `${name} cannot run: this run has no session key, so there is no conversation history to read.`, isError: true };
  }
  const params = { sessionKey, name, arguments: args && typeof args === "object" && !Array.isArray(args) ? args : {} };
  const once = () => sidecar.call("session.callTool", params);
  try {
    let result;
    try {
      result = await abortable(once(), opts.signal);
    } catch (err) {
      const reopen = isRpcError(err, codes.UNKNOWN_SESSION) || isSidecarError(err, "exited");
      if (!reopen) throw err;
      await sidecar.call("session.bootstrap", { sessionKey });
      result = await abortable(once(), opts.signal);
    }
    const text = typeof result?.content === "string" ? result.content : JSON.stringify(result?.content ?? "");
    return { text, isError: result?.isError === true, details: result?.details };
  } catch (err) {
    if (isRpcError(err, codes.INVALID_PARAMS)) {
      // The server names the tool and the field: the model can correct its call.
      return { text: `${name}: ${err.detail}`, isError: true };
    }
    if (opts.signal?.aborted) return { text: `${name} was cancelled.`, isError: true };
    return {
      text:
        `${name} could not run: ctxhost is unavailable (${describe(err)}). ` +
        "Earlier messages cannot be searched or opened right now; go on with what the context holds.",
      isError: true,
    };
  }
}
