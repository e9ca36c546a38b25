// The budget ctxhost compacts a pi session for, by what made pi ask (pi 1.x says why in
// `session_before_compact.reason`; 0.73 says nothing, which reads as "threshold").
//
// - threshold, manual: pi's window less its reserve, the size pi compacts for itself; a manual
//   compaction is forced like every compaction pi asks for, so it compacts below the threshold.
// - overflow: the model refused a request ctxhost counted as fitting, so the model counts more
//   than ctxhost estimates: a quarter of the budget is left as margin, and the retry that pi
//   makes next fits.

/** The share of the budget an overflow retry compacts to. */
export const OVERFLOW_SHARE = 0.75;

/**
 * @param {number | undefined} window pi's context window for the model
 * @param {number | undefined} reserve pi's `compaction.reserveTokens`
 * @param {string | undefined} reason `manual`, `threshold` or `overflow` (pi 1.x)
 * @returns {number | undefined}
 */
export function compactionBudget(window, reserve, reason) {
  if (window === undefined) return undefined;
  const budget = typeof reserve === "number" && reserve > 0 && reserve < window ? window - reserve : window;
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
