// pi's session branch as a message history: the messages of the entries on the current branch,
// in order, each with the id of the entry it came from. This is the whole history (a compaction
// entry hides nothing here), and its positions are the positions of ctxhost's mirror.
//
// The messages are built the way pi builds its context from the same entries
// (dist/core/session-manager.js buildSessionContext, dist/core/messages.js), so a message reads
// the same (JSON, and so fingerprint) here as in the `context` event's list.

/** @typedef {Record<string, any>} AgentMessage */

/**
 * @typedef {object} BranchHistory
 * @property {AgentMessage[]} messages
 * @property {(string | undefined)[]} entryIds the id of the entry each message came from
 */

/**
 * @param {unknown} timestamp an entry's timestamp (ISO string or milliseconds)
 * @returns {number}
 */
function millis(timestamp) {
  return new Date(/** @type {any} */ (timestamp)).getTime();
}

/**
 * @param {readonly any[]} entries pi session entries of one branch, root first
 * @returns {BranchHistory}
 */
export function branchHistory(entries) {
  /** @type {AgentMessage[]} */
  const messages = [];
  /** @type {(string | undefined)[]} */
  const entryIds = [];
  for (const entry of entries ?? []) {
    let message;
    if (entry?.type === "message" && entry.message && typeof entry.message === "object") {
      message = entry.message;
    } else if (entry?.type === "custom_message") {
      message = {
        role: "custom",
        customType: entry.customType,
        content: entry.content,
        display: entry.display,
        details: entry.details,
        timestamp: millis(entry.timestamp),
      };
    } else if (entry?.type === "branch_summary" && entry.summary) {
      message = { role: "branchSummary", summary: entry.summary, fromId: entry.fromId, timestamp: millis(entry.timestamp) };
    }
    if (message) {
      messages.push(message);
      entryIds.push(typeof entry.id === "string" ? entry.id : undefined);
    }
  }
  return { messages, entryIds };
}
