// The `__NAME__` context engine. Build: npm run build (componentize-js, see package.json).
//
// Traps of componentize-js, handled here:
// - An export fails by throwing a *string*: `throw "message"` becomes the contract's
//   `err(message)`. Throwing an Error object traps (the host then discards the instance), so
//   every export goes through `guard`, which turns any exception into its message.
// - The build disables `http` and `fetch-event`: otherwise the component imports wasi:http,
//   which ctxhost does not provide, and `plugins install` refuses it.
// - Build with the `componentize-js` command; `jco componentize` fails on a WIT path.
//
// Contract ctxhost:engine@0.2.0: `assemble` gets the context as columns (`request.context`:
// entries, roles, tokens, tools indexing toolNames, flags with isError and pruned), plus model
// and prompt when the runtime named them; a tool result's call id comes from `toolCallIds`.
// A fresh instance of an existing session is not re-fed its old messages.

import {
  log as hostLog,
  config as hostConfig,
  delegateCompaction,
} from 'ctxhost:engine/host@0.2.0';

// Per-session state lives in module variables: one component instance serves one session.
let config;

function readConfig() {
  // `plugins.entries.__NAME__.config`, already validated by the host against configSchema.
  if (config === undefined) config = JSON.parse(hostConfig());
  return config;
}

function log(level, message) {
  hostLog(level, String(message));
}

/**
 * Keeps the context's entries from position `start` on, in order, with the host's token counts:
 * one `keep-range` item however many entries it spans. `context` is the request's columns:
 * `context.entries[i]`, `context.roles[i]`, `context.tokens[i]` describe entry i.
 */
export function keepAll(context, start = 0) {
  const entries = Array.from(context.entries).slice(start);
  let items = [];
  if (entries.length === 1) {
    items = [{ tag: 'keep', val: entries[0] }];
  } else if (entries.length > 1) {
    const run = { first: entries[0], last: entries[entries.length - 1] };
    items = [{ tag: 'keep-range', val: run }];
  }
  return {
    items,
    estimatedTokens: Array.from(context.tokens)
      .slice(start)
      .reduce((sum, t) => sum + t, 0),
    systemPromptAddition: undefined,
  };
}

/** The host's built-in compaction (prune, then summarize), wrapped as a compact result. */
function delegateCompact(request) {
  let compaction;
  try {
    compaction = delegateCompaction(request);
  } catch (e) {
    const reason = e && e.payload ? `${e.payload.tag}: ${e.payload.val}` : String(e);
    return { ok: false, compacted: false, reason: `delegate-compaction failed: ${reason}` };
  }
  if (compaction === undefined || compaction === null) {
    return { ok: true, compacted: false, reason: 'nothing to compact' };
  }
  return { ok: true, compacted: true, compaction };
}

/** Every export with a default: a pass-through engine that keeps no state. */
const defaults = {
  info() {
    throw 'info() is not implemented';
  },
  bootstrap(_request) {
    return { bootstrapped: false, reason: 'engine keeps no state' };
  },
  ingest(_session, _message, _isHeartbeat) {
    return { ingested: false };
  },
  ingestBatch(session, messages, isHeartbeat) {
    return messages.filter((m) => engine.ingest(session, m, isHeartbeat).ingested).length;
  },
  assemble(request) {
    return keepAll(request.context);
  },
  compact(request) {
    return delegateCompact(request);
  },
  afterTurn(_request) {},
  prepareSubagentSpawn(_spawn) {
    return undefined;
  },
  rollbackSubagentSpawn(_handle) {},
  onSubagentEnded(_childSessionKey, _reason) {},
  dispose(_session) {},
};

/** Your engine: override `info` and what you change. */
const overrides = {
  info() {
    return { id: '__NAME__', name: '__NAME__', version: '0.1.0', ownsCompaction: false };
  },

  /** Decides what the model sees: here, the newest `keepLast` entries (all when unset). */
  assemble(request) {
    const keep = readConfig().keepLast;
    const count = request.context.entries.length;
    const start = keep === undefined ? 0 : Math.max(0, count - keep);
    if (start > 0) {
      log('debug', `leaving out ${start} entries`);
    }
    return keepAll(request.context, start);
  },
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

const engine = Object.fromEntries(
  Object.entries({ ...defaults, ...overrides }).map(([name, fn]) => [name, guard(fn)]),
);

// `info` has no error case in the contract: it is exported unguarded.
engine.info = overrides.info;

export { engine };
