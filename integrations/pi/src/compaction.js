// The budget ctxhost compacts a pi session for, by what made pi ask (pi 1.x says why in
// `session_before_compact.reason`; 0.73 says nothing, which reads as "threshold").
//
// - threshold, manual: pi's window less its reserve, the size pi compacts for itself; a manual
//   compaction is forced like every compaction pi asks for, so it compacts below the threshold.
// - never more than ctxhost's own window (`agents.defaults.contextWindow`): the server narrows
//   the window to it, but hands an engine that owns its compaction the budget as sent, and the
//   OpenClaw and Hermes bridges send the narrower of the two.
// - overflow: the model refused a request ctxhost counted as fitting, so the model counts more
//   than ctxhost estimates: a quarter of the budget is left as margin, and the retry that pi
//   makes next fits.

/** The share of the budget an overflow retry compacts to. */
export const OVERFLOW_SHARE = 0.75;

/**
 * @param {number | undefined} window pi's context window for the model
 * @param {number | undefined} reserve pi's `compaction.reserveTokens`
 * @param {string | undefined} reason `manual`, `threshold` or `overflow` (pi 1.x)
 * @param {number} [ctxhostWindow] ctxhost's window (the sidecar's `initialize` answer)
 * @returns {number | undefined}
 */
export function compactionBudget(window, reserve, reason, ctxhostWindow) {
  if (window === undefined) return undefined;
  const piBudget = typeof reserve === "number" && reserve > 0 && reserve < window ? window - reserve : window;
  const budget = typeof ctxhostWindow === "number" && ctxhostWindow > 0 ? Math.min(piBudget, ctxhostWindow) : piBudget;
  return reason === "overflow" ? Math.floor(budget * OVERFLOW_SHARE) : budget;
}

/**
 * Whether the last compaction's answer may be given again for an unchanged history: not after
 * an overflow, where that answer is what did not fit.
 * @param {string | undefined} reason
 */
export function mayReuseCompaction(reason) {
  return reason !== "overflow";
}
