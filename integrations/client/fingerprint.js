// The fingerprint of one message, as `ctxhost serve` stores it for the last message of each
// commit (docs/serve-protocol.md, "Message positions"): the first 16 hex digits of SHA-256 over
// JSON.stringify of the message. The server never computes it; it only compares.

import { createHash } from "node:crypto";

/**
 * @param {unknown} message an AgentMessage exactly as the runtime holds it
 * @returns {string} 16 lowercase hex digits
 */
export function fingerprint(message) {
  return createHash("sha256").update(JSON.stringify(message)).digest("hex").slice(0, 16);
}

/**
 * The fingerprint of the last message, or undefined for an empty history.
 * @param {readonly unknown[]} messages
 * @returns {string | undefined}
 */
export function lastFingerprint(messages) {
  return messages.length === 0 ? undefined : fingerprint(messages[messages.length - 1]);
}
