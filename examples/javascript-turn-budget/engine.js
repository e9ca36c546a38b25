// turn-budget: a ctxhost context engine (contract 0.2) that keeps a budget of the newest turns.
//
// On every `assemble` it keeps the leading compaction summary (when there is one), then the
// newest whole turns — a turn starts at a user message — as one `keep-range`: at most `maxTurns`
// turns and, within them, as many as fit `min(token budget, maxTokens)`. The newest turn is
// always kept, even over budget (the host's compaction is the safety net). When it left turns
// out it inserts one custom message saying how many. Compaction is left to the host.
//
// Traps of componentize-js this file respects:
// - An export fails by throwing a *string* (`throw "message"` becomes the contract's
//   `err(message)`); a thrown Error traps and the host discards the instance, so every export
//   runs through `guard`, which turns any exception into its message.
// - build.sh runs the `componentize-js` command (`jco componentize` fails on a WIT path) with
//   `--disable http fetch-event` (otherwise the component imports wasi:http, which ctxhost
//   does not provide).

import {
  log as hostLog,
  config as hostConfig,
  delegateCompaction,
} from 'ctxhost:engine/host@0.2.0';

const ENGINE_ID = 'turn-budget';
const CUSTOM_TYPE = 'turn-budget';
const DEFAULT_MAX_TURNS = 8;
// The context's columns carry a role as its position in the WIT enum `role`.
const ROLE_USER = 0;
const ROLE_COMPACTION_SUMMARY = 6;

// Per-session state lives in module variables: one component instance serves one session.
let settings;
let ingested = 0;

function config() {
  // `plugins.entries.turn-budget.config`, already validated by the host against configSchema.
  if (settings === undefined) {
    const raw = JSON.parse(hostConfig());
    settings = { maxTurns: raw.maxTurns ?? DEFAULT_MAX_TURNS, maxTokens: raw.maxTokens };
  }
  return settings;
}

/** The host's estimate (chars / 4, rounded up), computed here to spare an import. */
function estimateTokens(text) {
  return Math.ceil(text.length / 4);
}

function omissionNote(turns) {
  const text = `[turn-budget: ${turns} earlier turn${turns === 1 ? '' : 's'} omitted]`;
  const json = JSON.stringify({ role: 'custom', customType: CUSTOM_TYPE, content: text, display: false });
  return { json, tokens: estimateTokens(text) };
}

/**
 * The plan over the request's context (its columns): where the kept window of whole turns
 * begins, newest first. Returns `{ items, estimatedTokens, omittedTurns }`.
 */
export function planTurns(context, tokenLimit, maxTurns) {
  const { entries, roles, tokens } = context;
  const hasSummary = entries.length > 0 && roles[0] === ROLE_COMPACTION_SUMMARY;
  const bodyStart = hasSummary ? 1 : 0;
  const turnStarts = [];
  for (let i = bodyStart; i < entries.length; i++) {
    if (roles[i] === ROLE_USER || i === bodyStart) turnStarts.push(i);
  }
  let budget = tokenLimit ?? Infinity;
  if (hasSummary) budget -= tokens[0];

  // suffix[i]: the tokens of entries i.. to the end.
  const suffix = new Array(entries.length + 1).fill(0);
  for (let i = entries.length - 1; i >= bodyStart; i--) suffix[i] = suffix[i + 1] + tokens[i];
  let start = entries.length;
  let turns = 0;
  for (let t = turnStarts.length - 1; t >= 0 && turns < maxTurns; t--) {
    const candidate = turnStarts[t];
    const note = t > 0 ? omissionNote(t).tokens : 0;
    // The newest turn is always kept; an older one only when it fits with the note.
    if (turns > 0 && suffix[candidate] + note > budget) break;
    start = candidate;
    turns += 1;
  }
  const omittedTurns = turnStarts.filter((s) => s < start).length;

  const items = [];
  let estimatedTokens = 0;
  if (omittedTurns > 0) {
    const note = omissionNote(omittedTurns);
    items.push({ tag: 'insert', val: note.json });
    estimatedTokens += note.tokens;
  }
  if (hasSummary) {
    items.push({ tag: 'keep', val: entries[0] });
    estimatedTokens += tokens[0];
  }
  if (start < entries.length) {
    const first = entries[start];
    const last = entries[entries.length - 1];
    items.push(first === last ? { tag: 'keep', val: first } : { tag: 'keep-range', val: { first, last } });
    estimatedTokens += suffix[start];
  }
  return { items, estimatedTokens, omittedTurns };
}

const engine = {
  info() {
    return { id: ENGINE_ID, name: 'Turn budget (JavaScript)', version: '0.1.0', ownsCompaction: false };
  },
  bootstrap(_request) {
    // Nothing to import: every decision is made from what `assemble` receives.
    return { bootstrapped: true };
  },
  ingest(_session, _message, _isHeartbeat) {
    ingested += 1;
    return { ingested: true };
  },
  ingestBatch(_session, messages, _isHeartbeat) {
    ingested += messages.length;
    return messages.length;
  },
  assemble(request) {
    const { maxTurns, maxTokens } = config();
    const limits = [request.tokenBudget, maxTokens].filter((n) => n !== undefined && n !== null);
    const tokenLimit = limits.length > 0 ? Math.min(...limits) : undefined;
    const plan = planTurns(request.context, tokenLimit, maxTurns);
    if (plan.omittedTurns > 0) {
      hostLog('debug', `left out ${plan.omittedTurns} turns; ${ingested} messages ingested`);
    }
    return { items: plan.items, estimatedTokens: plan.estimatedTokens };
  },
  compact(request) {
    let compaction;
    try {
      compaction = delegateCompaction(request);
    } catch (e) {
      const reason = e && e.payload ? `${e.payload.tag}: ${e.payload.val}` : String(e);
      throw `delegate-compaction failed: ${reason}`;
    }
    if (compaction === undefined || compaction === null) {
      return { ok: true, compacted: false, reason: 'nothing to compact' };
    }
    return { ok: true, compacted: true, compaction };
  },
  afterTurn(_request) {},
  prepareSubagentSpawn(_spawn) {
    return undefined;
  },
  rollbackSubagentSpawn(handle) {
    throw `rollback handle ${handle} was never issued`;
  },
  onSubagentEnded(_childSessionKey, _reason) {},
  dispose(_session) {},
};

/** Runs an export; any exception becomes the string the contract's `err` carries. */
function guard(fn) {
  return (...args) => {
    try {
      return fn(...args);
    } catch (e) {
      if (typeof e === 'string') throw e;
      throw e instanceof Error ? e.message : String(e);
    }
  };
}

const guarded = Object.fromEntries(
  Object.entries(engine).map(([name, fn]) => [name, name === 'info' ? fn : guard(fn)]),
);

export { guarded as engine };
