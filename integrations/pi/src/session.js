// One pi session driven through `ctxhost serve` (docs/serve-protocol.md).
//
// The history is pi's branch: every message of the entries on the current branch, in order,
// compaction or not (src/branch.js), followed by the messages of the running prompt that pi has
// not saved yet (the `context` event shows them before they reach the session file). Its
// positions are the positions of ctxhost's mirror under $CTXHOST_HOME/sessions/, which is kept
// in step with `session.sync` (the missing tail, or a reset when the branch no longer starts with
// the mirror: another branch, a session edited outside ctxhost).
//
// - `context` (before every model call): take the new messages of pi's list (what follows the
//   history's last message in it), sync them, assemble, and hand pi the assembled messages.
// - `session_before_compact`: compact the mirror through the engine, and answer pi with the
//   engine's summary and the entry id of the first message it kept, so pi writes a normal
//   compaction entry that it reloads itself (with or without ctxhost).

import { chainOf, fingerprint } from "../client/fingerprint.js";
import { mayReuseCompaction } from "./compaction.js";
import { fromItems, summaryText, syncMirror, withTimestamps } from "../client/mirror.js";
import { codes, isRpcError, isSidecarError } from "../client/sidecar.js";
import { branchHistory } from "./branch.js";

/** @typedef {Record<string, any>} AgentMessage */
/** @typedef {{ info: (m: string) => void, warn: (m: string) => void }} Log */

/**
 * @typedef {object} AssembleOptions
 * @property {number} [tokenBudget] the model's context window
 * @property {{ provider?: string, id: string }} [model]
 */

/** @param {unknown} err */
function needsBootstrap(err) {
  return isRpcError(err, codes.UNKNOWN_SESSION) || isSidecarError(err, "exited");
}

/** @param {Record<string, unknown>} params */
function compactParams(params) {
  return Object.fromEntries(Object.entries(params).filter(([, v]) => v !== undefined));
}

export class PiSession {
  /** @type {import("../client/sidecar.js").Sidecar} */
  #sidecar;
  /** @type {Log} */
  #log;
  /** @type {() => readonly any[]} */
  #branch;
  /** @type {AgentMessage[]} */
  #messages = [];
  /** @type {(string | undefined)[]} */
  #fingerprints = [];
  /** @type {string[]} the chains of the history's first 1, 2, … messages, as far as computed */
  #chains = [];
  /** @type {(string | undefined)[]} */
  #entryIds = [];
  #loaded = false;
  /** What the server's mirror holds, as last heard. @type {{ count: number, fp: string | null, chain: string | null } | null} */
  #mirror = null;
  /**
   * The operation running on this session: pi does not wait for one handler before firing the
   * next (its threshold compaction starts while an `agent_end` handler still syncs), so each
   * operation waits for the one before it. @type {Promise<unknown>}
   */
  #queue = Promise.resolve();
  /**
   * The last compaction answered, and the history it was made for ("<length>:<last fingerprint>").
   * @type {{ at: string, compacted: any, answer: any } | null}
   */
  #lastCompaction = null;

  /**
   * @param {{ sidecar: import("../client/sidecar.js").Sidecar, key: string, log: Log, branch: () => readonly any[] }} opts
   *   `branch` reads pi's current branch entries (ctx.sessionManager.getBranch())
   */
  constructor(opts) {
    this.#sidecar = opts.sidecar;
    this.key = opts.key;
    this.#log = opts.log;
    this.#branch = opts.branch;
  }

  get sidecar() {
    return this.#sidecar;
  }

  /** Messages in the history (the mirror's count once in step). */
  get length() {
    return this.#messages.length;
  }

  /** @param {number} i */
  #fp(i) {
    return (this.#fingerprints[i] ??= fingerprint(this.#messages[i]));
  }
  /**
   * The chain of the history's first `n` messages (undefined for none).
   * @param {number} n
   */
  #chain(n) {
    return chainOf(n, (i) => this.#fp(i), this.#chains);
  }


  /**
   * Runs `operation` after the operations before it on this session.
   * @template T
   * @param {() => Promise<T>} operation
   * @returns {Promise<T>}
   */
  #exclusive(operation) {
    const run = this.#queue.then(operation, operation);
    this.#queue = run.catch(() => {});
    return run;
  }

  /**
   * Opens the session on the server (creating its mirror) and learns what the mirror holds.
   * @param {string} [sessionId]
   */
  open(sessionId) {
    return this.#exclusive(() => this.#open(sessionId));
  }

  /** @param {string} [sessionId] */
  async #open(sessionId) {
    const r = await this.#sidecar.call("session.bootstrap", compactParams({ sessionKey: this.key, sessionId }));
    this.#mirror = { count: r.messageCount ?? 0, fp: r.lastFingerprint ?? null, chain: r.chain ?? null };
    return r;
  }

  /**
   * A session method; a server that does not know the session (it restarted) or died mid-call
   * gets the session opened again and the call once more.
   * @param {string} method
   * @param {Record<string, unknown>} params
   */
  async call(method, params) {
    try {
      return await this.#sidecar.call(method, params);
    } catch (err) {
      if (!needsBootstrap(err)) throw err;
      await this.#open();
      return await this.#sidecar.call(method, params);
    }
  }

  /** Replaces the history with pi's branch. @param {readonly any[]} entries */
  #load(entries) {
    const { messages, entryIds } = branchHistory(entries);
    this.#messages = messages;
    this.#entryIds = entryIds;
    this.#fingerprints = [];
    this.#chains = [];
    this.#loaded = true;
  }

  /**
   * The messages of `list` after the history's last one, or null when the history's last
   * message is not in `list` (pi's list is from another branch, or rewritten).
   * @param {readonly AgentMessage[]} list
   * @returns {AgentMessage[] | null}
   */
  #after(list) {
    const n = this.#messages.length;
    if (n === 0) return list.filter((m) => m?.role !== "compactionSummary");
    const last = this.#fp(n - 1);
    for (let i = list.length - 1; i >= 0; i--) {
      if (fingerprint(list[i]) === last) return list.slice(i + 1);
    }
    return null;
  }

  /**
   * Brings the history in step with pi's message list (a `context` event's, or the messages
   * an `agent_end` reports): appends what it lacks, reloading the branch first when the list
   * does not continue the history.
   * @param {readonly AgentMessage[]} list
   * @param {{ reload?: boolean }} [opts] reload: false leaves the history alone when the list does not continue it
   * @returns {boolean} whether the history continues into `list`
   */
  follow(list, opts = {}) {
    if (!this.#loaded) this.#load(this.#branch());
    let tail = this.#after(list);
    if (tail === null && opts.reload !== false) {
      this.#load(this.#branch());
      tail = this.#after(list);
    }
    if (tail === null) return false;
    for (const m of tail) {
      this.#messages.push(m);
      this.#entryIds.push(undefined);
    }
    return true;
  }

  /** Syncs the mirror with the history when it is out of step. */
  async #syncMirror(retried = false) {
    if (!this.#mirror) await this.#open();
    const mirror = /** @type {{ count: number, fp: string | null, chain: string | null }} */ (this.#mirror);
    const n = this.#messages.length;
    const last = n ? this.#fp(n - 1) : null;
    // By the chain when the mirror knows it (a middle rewritten is another history), else by
    // the last message alone.
    const holds = (/** @type {number} */ m, /** @type {string | null} */ fp) =>
      m === 0 || (mirror.chain ? this.#chain(m) === mirror.chain : this.#fp(m - 1) === fp);
    if (mirror.count === n && holds(n, last) && mirror.fp === last) return;
    const extends_ = mirror.count <= n && holds(mirror.count, mirror.fp);
    if (!extends_) {
      this.#log.info(
        `ctxhost: the mirror of ${this.key} (${mirror.count} messages) does not start the branch pi is on (${n}); resetting it (the server keeps the old file)`,
      );
    }
    try {
      await syncMirror((method, params) => this.call(method, params), {
        sessionKey: this.key,
        messages: this.#messages,
        from: extends_ ? mirror.count : 0,
        reset: !extends_,
        fingerprintOf: (i) => this.#fp(i),
        maxLineBytes: this.#sidecar.initialized?.limits?.maxLineBytes,
      });
    } catch (err) {
      // The mirror is not where it was last heard to be (another pi process on the same session
      // wrote to it): learn where it is and sync once more.
      if (retried || !isRpcError(err, codes.INVALID_PARAMS)) throw err;
      this.#log.info(`ctxhost: the mirror of ${this.key} moved (${err.detail}); syncing again`);
      await this.#open();
      return this.#syncMirror(true);
    }
    this.#mirror = { count: n, fp: last, chain: this.#chain(n) ?? null };
  }

  /**
   * `session.assemble` for the history, syncing the mirror first (and once more when the
   * server's mirror moved under us).
   * @param {AssembleOptions} opts
   */
  async #assemble(opts) {
    await this.#syncMirror();
    const request = () => {
      const n = this.#messages.length;
      return this.call(
        "session.assemble",
        compactParams({
          sessionKey: this.key,
          messageCount: n,
          lastFingerprint: n ? this.#fp(n - 1) : undefined,
          chain: this.#chain(n),
          tokenBudget: opts.tokenBudget,
          model: opts.model,
        }),
      );
    };
    let r = await request();
    if (r.status === "mismatch") {
      this.#mirror = { count: r.messageCount, fp: r.lastFingerprint ?? null, chain: r.chain ?? null };
      await this.#syncMirror();
      r = await request();
      if (r.status === "mismatch") {
        throw new Error(`the mirror of ${this.key} is still out of step after a sync (mirror ${r.messageCount}, history ${this.#messages.length})`);
      }
    }
    if (r.compaction?.compacted) {
      this.#log.info(`ctxhost: compacted ${this.key} before assembling: ${r.compaction.tokensBefore} → ${r.compaction.tokensAfter} tokens`);
    }
    return r;
  }

  /**
   * What the model gets for pi's `context` list: the engine's assembly of the history.
   * @param {readonly AgentMessage[]} list the `context` event's messages
   * @param {AssembleOptions} opts
   * @returns {Promise<{ messages: AgentMessage[], estimatedTokens: number, systemPromptAddition?: string }>}
   */
  context(list, opts) {
    return this.#exclusive(() => this.#context(list, opts));
  }

  /**
   * @param {readonly AgentMessage[]} list
   * @param {AssembleOptions} opts
   */
  async #context(list, opts) {
    if (!this.follow(list)) {
      throw new Error(
        `pi's ${list.length} messages do not continue its session branch (${this.#messages.length} messages); was the list rewritten by another extension?`,
      );
    }
    const r = await this.#assemble(opts);
    return {
      messages: withTimestamps(fromItems(this.#messages, r.items ?? [])),
      estimatedTokens: r.estimatedTokens,
      ...(r.systemPromptAddition ? { systemPromptAddition: r.systemPromptAddition } : {}),
    };
  }

  /**
   * Answers pi's `session_before_compact` with the engine's compaction: compacts the mirror,
   * assembles it, and turns the compaction summary and the first message the engine kept into
   * pi's compaction (summary, first kept entry id, tokens before). Null when the engine has no
   * compaction to offer (pi is then told to cancel).
   * @param {{ branchEntries?: readonly any[], customInstructions?: string, preparation?: any, reason?: string }} event
   * @param {AssembleOptions & { engine?: string }} opts
   */
  compaction(event, opts) {
    return this.#exclusive(() => this.#compaction(event, opts));
  }

  /**
   * @param {{ branchEntries?: readonly any[], customInstructions?: string, preparation?: any, reason?: string }} event
   * @param {AssembleOptions & { engine?: string }} opts
   */
  async #compaction(event, opts) {
    // pi may start a compaction and start another before the first is written (its check after
    // a prompt and its check before the next one both fire), then abort one of them.
    if (event.signal?.aborted) return { compacted: null, answer: null, skipped: "pi aborted this compaction" };
    const entries = event.branchEntries ?? this.#branch();
    this.#load(entries);
    const n = this.#messages.length;
    const at = n ? `${n}:${this.#fp(n - 1)}` : "0";
    const previous = this.#lastCompaction;
    if (previous && previous.at === at && mayReuseCompaction(event.reason)) {
      // Nothing new since ctxhost's last compaction: the same answer, not a second compaction
      // of what is left; none at all when pi already wrote it.
      const written = entries.some((e) => e?.type === "compaction" && e.summary === previous.answer.summary);
      return written
        ? { compacted: previous.compacted, answer: null, skipped: "pi already holds ctxhost's latest compaction" }
        : { compacted: previous.compacted, answer: previous.answer, reused: true };
    }
    await this.#syncMirror();
    const compacted = await this.call(
      "session.compact",
      compactParams({ sessionKey: this.key, force: true, tokenBudget: opts.tokenBudget, customInstructions: event.customInstructions }),
    );
    const r = await this.#assemble(opts);
    const items = r.items ?? [];
    const summaryItem = items.find((/** @type {any} */ it) => it?.message?.__ctxhost?.kind === "compactionSummary");
    if (!summaryItem) {
      // An engine that owns its compaction may show it its own way (lossless: summaries of its
      // tree): the model still gets them through `context`, but pi has no summary to store.
      const why = compacted?.compacted === true
        ? `the engine compacted (${compacted.tokensBefore} → ${compacted.tokensAfter} tokens) but shows no compaction summary pi could store; the model gets its assembly all the same`
        : compacted?.reason;
      return { compacted: { ...compacted, reason: why }, answer: null };
    }
    const kept = items.find((/** @type {any} */ it) => typeof it?.index === "number" || typeof it?.from === "number");
    const position = kept ? (typeof kept.index === "number" ? kept.index : kept.from) : undefined;
    let firstKeptEntryId = position === undefined ? undefined : this.#entryIds[position];
    if (!firstKeptEntryId) {
      firstKeptEntryId = event.preparation?.firstKeptEntryId;
      this.#log.warn(
        `ctxhost: the first message ctxhost kept of ${this.key} (position ${position}) has no pi entry; pi keeps from its own cut point`,
      );
    }
    const summary = summaryText(summaryItem.message);
    // pi writes what it is given into its own file: never an empty summary, never a first kept
    // entry it does not have.
    if (!summary) return { compacted: { ...compacted, reason: "the engine's compaction summary is empty" }, answer: null };
    if (compacted?.compacted !== true && entries.some((e) => e?.type === "compaction" && e.summary === summary)) {
      // The engine compacted nothing now, and its last compaction is pi's already.
      return { compacted: { ...compacted, reason: `${compacted?.reason ?? "nothing to compact"}; pi holds ctxhost's latest compaction` }, answer: null };
    }
    if (typeof firstKeptEntryId !== "string") {
      return { compacted: { ...compacted, reason: "no entry of pi's branch to keep from" }, answer: null };
    }
    const result = {
      compacted,
      answer: {
        summary,
        firstKeptEntryId,
        tokensBefore: typeof compacted?.tokensBefore === "number" ? compacted.tokensBefore : event.preparation?.tokensBefore,
        details: {
          ctxhost: compactParams({
            engine: opts.engine,
            compacted: compacted?.compacted === true,
            tokensAfter: compacted?.tokensAfter,
            firstKeptIndex: position,
            reason: compacted?.reason ?? undefined,
          }),
        },
      },
    };
    this.#lastCompaction = { at, compacted, answer: result.answer };
    return result;
  }

  /**
   * After a prompt: the messages pi reports for it (`agent_end`) reach the mirror now, so the
   * last reply is searchable and `ctxhost context` shows the whole session. Best effort.
   * @param {readonly AgentMessage[]} messages
   */
  settle(messages) {
    return this.#exclusive(async () => {
      if (!this.follow(messages, { reload: false })) return false;
      await this.#syncMirror();
      return true;
    });
  }

  /** Closes the session on the server (its engine instance is disposed; the mirror stays). */
  async close() {
    if (!this.#sidecar.running) return;
    await this.#sidecar.call("session.close", { sessionKey: this.key });
  }
}
