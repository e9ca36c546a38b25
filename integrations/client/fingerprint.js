// The fingerprints `ctxhost serve` compares (docs/serve-protocol.md, "Message positions"): a
// message's fingerprint is the first 16 hex digits of SHA-256 over JSON.stringify of the
// message; the chain of a history is the first 16 hex digits of SHA-256 over the previous
// message's chain and this message's fingerprint. The server computes the chain from the
// fingerprints a commit or sync sends, so an equal chain means an equal history, middle
// included, where an equal last fingerprint only means an equal last message.

import { createHash } from "node:crypto";

/** @param {string} text */
const sha256_16 = (text) => createHash("sha256").update(text).digest("hex").slice(0, 16);

/**
 * @param {unknown} message an AgentMessage exactly as the runtime holds it
 * @returns {string} 16 lowercase hex digits
 */
export function fingerprint(message) {
  return sha256_16(JSON.stringify(message));
}

/**
 * The fingerprint of the last message, or undefined for an empty history.
 * @param {readonly unknown[]} messages
 * @returns {string | undefined}
 */
export function lastFingerprint(messages) {
  return messages.length === 0 ? undefined : fingerprint(messages[messages.length - 1]);
}

/**
 * The chain of a history whose chain was `previous` (undefined when it was empty) once a
 * message of fingerprint `fp` is appended.
 * @param {string | undefined} previous
 * @param {string} fp
 * @returns {string} 16 lowercase hex digits
 */
export function chain(previous, fp) {
  return sha256_16((previous ?? "") + fp);
}

/**
 * The chain of the first `n` messages (undefined for none). `chains` holds the chains already
 * known (`chains[i]`: of the first i + 1 messages) and is extended, so a caller whose history
 * only grows computes each once.
 * @param {number} n
 * @param {(i: number) => string} fingerprintOf the fingerprint of message i
 * @param {string[]} [chains]
 * @returns {string | undefined}
 */
export function chainOf(n, fingerprintOf, chains = []) {
  for (let i = chains.length; i < n; i++) chains.push(chain(chains[i - 1], fingerprintOf(i)));
  return n === 0 ? undefined : chains[n - 1];
}
