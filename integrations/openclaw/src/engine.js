// The OpenClaw ContextEngine (plugin API 2026.9) mapped onto `ctxhost serve`
// (docs/serve-protocol.md).
//
// Per turn OpenClaw 2026.9.6 (`openclaw agent --local`) was seen to run: factory → bootstrap →
// assemble → assemble again before the model call (handed the engine's own output) → commitTurn
// → dispose. On the first turn of a new session assemble comes without any bootstrap, so every
// session method opens the session itself when the server does not know it. The mirror transcript under
// $CTXHOST_HOME/sessions is written only through commitTurn (and session.sync when a turn
// bypassed the engine), so ingest/ingestBatch are no-ops: counting their messages too would put
// every turn into the mirror twice.

import { performance } from "node:perf_hooks";
import { abortable } from "../client/abort.js";
import { chainOf, fingerprint } from "../client/fingerprint.js";
import { fromItems, isInserted, syncMirror, withTimestamps } from "../client/mirror.js";
import { codes, isRpcError, isSidecarError } from "../client/sidecar.js";
import { FailureLog } from "./health.js";
import { estimateTokens, fitToBudget } from "./tokens.js";

/** @typedef {Record<string, any>} AgentMessage */
/** @typedef {{ info: (m: string) => void, warn: (m: string) => void }} Log */
/**
 * What assemble answered for a session in the current turn.
 * @typedef {object} LastOutput
 * @property {AgentMessage[]} messages what it returned
 * @property {(string | undefined)[]} fingerprints of `messages`, computed when needed
 * @property {number} estimatedTokens
 * @property {string} [systemPromptAddition]
 * @property {AgentMessage[]} [history] the runtime history it was assembled from (in step with the mirror)
 * @property {Record<string, unknown>} [request] the assemble request, without the budget
 */

export const ENGINE_ID = "ctxhost";

export { isInserted, withTimestamps };

/**
 * State shared by every engine instance of one sidecar (OpenClaw builds an engine per turn).
 */
export class Bridge {
  /**
   * @param {import("../client/sidecar.js").Sidecar} sidecar
   * @param {Log} log
   * @param {ReturnType<typeof import("../client/timing.js").createTiming>} timing
   */
  constructor(sidecar, log, timing) {
    this.sidecar = sidecar;
    this.log = log;
    this.timing = timing;
    /** How many engine instances hold each session open. @type {Map<string, number>} */
    this.refs = new Map();
    /**
     * What assemble last returned per session, until the turn is committed: OpenClaw hands it
     * back before each model call.
     * @type {Map<string, LastOutput>}
     */
    this.lastOutput = new Map();
    /**
     * The parent of every subagent this process prepared and that has not ended: the server
     * forgets the link when it restarts or closes the parent (OpenClaw disposes the parent's
     * engine after every turn), and its unknown-child error names only the child.
     * @type {Map<string, string>}
     */
    this.parents = new Map();
    /**
     * The last failure the plugin saw (an assemble that fell back to OpenClaw's own messages, a
     * commit OpenClaw must retry) and the last turn ctxhost served: status shows them even when
     * the sidecar is gone.
     */
    this.failures = new FailureLog();
  }
}

/**
 * @param {unknown} err
 * @returns {boolean} whether the server forgot the session (it restarted) or went away mid-call
 */
function needsBootstrap(err) {
  return (
    isRpcError(err, codes.UNKNOWN_SESSION) || isSidecarError(err, "exited")
  );
}

/** @param {unknown} err */
function describe(err) {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Drops undefined fields (the protocol's optional params are absent, not null).
 * @param {Record<string, unknown>} params
 */
function compactParams(params) {
  return Object.fromEntries(Object.entries(params).filter(([, v]) => v !== undefined));
}

export class CtxhostContextEngine {
  /** @type {Bridge} */
  #bridge;
  /** Sessions this instance bootstrapped (closed again by dispose). @type {Set<string>} */
  #opened = new Set();

  /**
   * @param {Bridge} bridge
   * @param {{ version?: string }} [opts]
   */
  constructor(bridge, opts = {}) {
    this.#bridge = bridge;
    this.info = Object.freeze({
      id: ENGINE_ID,
      name: "ctxhost",
      version: opts.version,
      ownsCompaction: true,
      transcriptSemantics: Object.freeze({
        currentTurnFence: /** @type {const} */ ("before-current-turn-entry-v1"),
        turnAdvancementIdempotency: /** @type {const} */ ("atomic-idempotent-v1"),
      }),
    });
  }

  get #sidecar() {
    return this.#bridge.sidecar;
  }

  get #log() {
    return this.#bridge.log;
  }

  /**
   * Times one hook for CTXHOST_BRIDGE_TIMING.
   * @template T
   * @param {string} name
   * @param {() => Promise<T>} run
   * @param {(result: T) => string} [detail] what to say about the result
   * @returns {Promise<T>}
   */
  async #timed(name, run, detail) {
    if (!this.#bridge.timing.enabled) return run();
    const start = performance.now();
    let result;
    try {
      result = await run();
      return result;
    } finally {
      const ms = performance.now() - start;
      this.#bridge.timing.hook(name, ms, result !== undefined && detail ? detail(result) : undefined);
    }
  }

  /**
   * Opens the session on the server and takes this instance's reference to it.
   * @param {string} key
   * @param {string} [sessionId]
   */
  async #bootstrap(key, sessionId) {
    const result = await this.#sidecar.call("session.bootstrap", compactParams({ sessionKey: key, sessionId }));
    if (!this.#opened.has(key)) {
      this.#opened.add(key);
      this.#bridge.refs.set(key, (this.#bridge.refs.get(key) ?? 0) + 1);
    }
    return result;
  }

  /**
   * A session method; when the server does not know the session (it restarted, or another
   * instance closed it) or died mid-call, bootstrap again and retry once.
   * @param {string} key
   * @param {string} method
   * @param {Record<string, unknown>} params
   */
  async #session(key, method, params) {
    try {
      return await this.#sidecar.call(method, params);
    } catch (err) {
      if (!needsBootstrap(err)) throw err;
      await this.#bootstrap(key);
      return await this.#sidecar.call(method, params);
    }
  }

  /** @param {{ sessionId: string, sessionKey?: string }} params */
  #key(params) {
    return params.sessionKey ?? params.sessionId;
  }

  /**
   * @param {{ sessionId: string, sessionKey?: string }} params
   * @returns {Promise<{ bootstrapped: boolean, importedMessages?: number, reason?: string }>}
   */
  async bootstrap(params) {
    return this.#timed("bootstrap", async () => {
      const key = this.#key(params);
      try {
        const r = await this.#bootstrap(key, params.sessionId);
        const engine = this.#sidecar.initialized?.engine?.id ?? "?";
        return {
          bootstrapped: true,
          importedMessages: 0,
          reason: r.created
            ? `ctxhost engine ${engine}: new mirror`
            : `ctxhost engine ${engine}: mirror holds ${r.messageCount} messages`,
        };
      } catch (err) {
        this.#log.warn(`ctxhost: bootstrap of ${key} failed: ${describe(err)}`);
        this.#bridge.failures.record({ operation: "bootstrap", sessionKey: key, message: describe(err) });
        return { bootstrapped: false, reason: `ctxhost sidecar unavailable: ${describe(err)}` };
      }
    });
  }

  /**
   * OpenClaw's transcript is its own; ctxhost keeps a mirror and never rewrites OpenClaw's.
   * @returns {Promise<{ changed: boolean, bytesFreed: number, rewrittenEntries: number }>}
   */
  async maintain() {
    return { changed: false, bytesFreed: 0, rewrittenEntries: 0 };
  }

  /**
   * A no-op: the mirror is written by commitTurn, which carries the same messages atomically.
   * @returns {Promise<{ ingested: boolean }>}
   */
  async ingest() {
    return { ingested: false };
  }

  /**
   * A no-op, like ingest.
   * @returns {Promise<{ ingestedCount: number }>}
   */
  async ingestBatch() {
    return { ingestedCount: 0 };
  }

  /**
   * Appends one accepted turn to the mirror (and hands it to the engine's ingest-batch) exactly
   * once per advancement key. Failures throw: OpenClaw keeps the turn queued and retries it.
   * @param {{ advancementKey: string, messages: AgentMessage[], sessionId: string, sessionKey?: string }} params
   * @returns {Promise<{ status: "committed" | "duplicate" }>}
   */
  async commitTurn(params) {
    return this.#timed("commitTurn", async () => {
      const key = this.#key(params);
      const messages = params.messages ?? [];
      const fingerprints = messages.map(fingerprint);
      let r;
      try {
        r = await this.#session(
          key,
          "session.commitTurn",
          compactParams({
            sessionKey: key,
            advancementKey: params.advancementKey,
            messages,
            fingerprints,
            lastFingerprint: fingerprints.at(-1),
          }),
        );
      } catch (err) {
        this.#bridge.failures.record({
          operation: "commitTurn",
          sessionKey: key,
          message: describe(err),
          outcome: "the turn kept in its durable outbox, to be committed again",
        });
        throw err;
      }
      this.#bridge.lastOutput.delete(key);
      return { status: r.status };
    });
  }

  /**
   * The context of the next model call.
   * @param {{ sessionId: string, sessionKey?: string, messages: AgentMessage[], tokenBudget?: number, availableTools?: Set<string>, model?: string, prompt?: string }} params
   * @returns {Promise<{ messages: AgentMessage[], estimatedTokens: number, systemPromptAddition?: string }>}
   */
  async assemble(params) {
    return this.#timed("assemble", async () => {
      const key = this.#key(params);
      const messages = params.messages ?? [];
      const budget = params.tokenBudget;

      const own = this.#ownOutput(key, messages);
      if (own) return this.#answerOwn(key, messages, own, budget);

      const request = compactParams({
        sessionKey: key,
        prompt: params.prompt,
        model: params.model,
        availableTools: params.availableTools ? [...params.availableTools] : undefined,
      });
      try {
        const r = await this.#serverAssemble(key, messages, { ...request, ...compactParams({ tokenBudget: budget }) }, true);
        this.#bridge.failures.served();
        return this.#finish(key, r.messages, r.estimatedTokens, r.systemPromptAddition, budget, { history: messages, request });
      } catch (err) {
        this.#log.warn(`ctxhost: assemble of ${key} failed (${describe(err)}); passing the history through`);
        this.#bridge.failures.record({
          operation: "assemble",
          sessionKey: key,
          message: describe(err),
          outcome: "its own history, trimmed to the budget",
        });
        const total = messages.reduce((s, m) => s + estimateTokens(m), 0);
        return this.#finish(key, messages, total, undefined, budget);
      }
    }, (r) => `in=${(params.messages ?? []).length} out=${r.messages.length} inserted=${r.messages.filter(isInserted).length} tokens=${r.estimatedTokens} budget=${params.tokenBudget}`);
  }

  /**
   * The context ctxhost assembles for `history` (the runtime's whole history), syncing the
   * mirror first when `resync` allows and it is out of step.
   * @param {string} key
   * @param {AgentMessage[]} history
   * @param {Record<string, unknown>} request
   * @param {boolean} resync
   */
  async #serverAssemble(key, history, request, resync) {
    let res = await this.#assembleOnce(key, history, request);
    if (res.status === "mismatch") {
      if (!resync) throw new Error(`the mirror moved (mirror ${res.messageCount}, history ${history.length})`);
      await this.#resync(key, history, res);
      res = await this.#assembleOnce(key, history, request);
      if (res.status === "mismatch") {
        throw new Error(`mirror still out of step after sync (mirror ${res.messageCount}, history ${history.length})`);
      }
    }
    if (res.compaction?.compacted) {
      this.#log.info(
        `ctxhost: compacted ${key} before assembling: ${res.compaction.tokensBefore} → ${res.compaction.tokensAfter} tokens`,
      );
    }
    return {
      messages: withTimestamps(fromItems(history, res.items ?? [])),
      estimatedTokens: res.estimatedTokens,
      systemPromptAddition: res.systemPromptAddition ?? undefined,
    };
  }

  /**
   * Answers the runtime handing back what assemble returned earlier in the turn, followed by the
   * turn's newer messages if any. When it no longer fits the budget (a long tool loop), ctxhost
   * assembles the turn's history again for what the budget leaves (compacting if need be); only
   * if that fails are the oldest messages dropped client-side.
   * @param {string} key
   * @param {AgentMessage[]} messages
   * @param {LastOutput} own
   * @param {number | undefined} budget
   */
  async #answerOwn(key, messages, own, budget) {
    const newer = messages.slice(own.messages.length);
    const extra = newer.reduce((s, m) => s + estimateTokens(m), 0);
    const total = own.estimatedTokens + extra;
    if (budget !== undefined && budget > 0 && total > budget && own.history) {
      try {
        const r = await this.#serverAssemble(
          key,
          own.history,
          { ...own.request, tokenBudget: Math.max(1, budget - extra) },
          false,
        );
        this.#bridge.failures.served();
        return this.#finish(key, [...r.messages, ...newer], r.estimatedTokens + extra, r.systemPromptAddition, budget, own);
      } catch (err) {
        this.#log.warn(`ctxhost: assembling ${key} again for a budget of ${budget} failed (${describe(err)})`);
        this.#bridge.failures.record({
          operation: "assemble",
          sessionKey: key,
          message: `assembling again for a budget of ${budget}: ${describe(err)}`,
          outcome: "the earlier context with its oldest messages dropped",
        });
      }
    }
    return this.#finish(key, messages, total, own.systemPromptAddition, budget, own);
  }

  /**
   * @param {string} key
   * @param {AgentMessage[]} messages
   * @param {Record<string, unknown>} request
   */
  async #assembleOnce(key, messages, request) {
    const fps = messages.map(fingerprint);
    return this.#session(key, "session.assemble", {
      ...request,
      messageCount: messages.length,
      ...(messages.length ? { lastFingerprint: fps.at(-1), chain: chainOf(fps.length, (i) => fps[i]) } : {}),
    });
  }

  /**
   * Brings the mirror in step with the runtime's history: the missing tail when the history
   * starts with the mirror, else a reset with the whole history (the server keeps the old file).
   * @param {string} key
   * @param {AgentMessage[]} messages
   * @param {{ messageCount: number, lastFingerprint?: string | null, chain?: string | null }} mirror
   */
  async #resync(key, messages, mirror) {
    const m = mirror.messageCount;
    const fps = messages.map(fingerprint);
    // By the chain when the mirror knows it (a middle rewritten is not a start), else by the
    // last message alone.
    const starts = () =>
      mirror.chain ? chainOf(m, (i) => fps[i]) === mirror.chain : fps[m - 1] === mirror.lastFingerprint;
    const extends_ = m === 0 || (m <= messages.length && starts());
    const from = extends_ ? m : 0;
    this.#log.info(
      extends_
        ? `ctxhost: mirror of ${key} lacks ${messages.length - m} message(s) (a turn bypassed the engine); syncing the tail`
        : `ctxhost: mirror of ${key} (${m} messages) does not match the history (${messages.length}); resetting it`,
    );
    await syncMirror((method, params) => this.#session(key, method, params), {
      sessionKey: key,
      messages,
      from,
      reset: !extends_,
      fingerprintOf: (i) => fps[i],
      maxLineBytes: this.#sidecar.initialized?.limits?.maxLineBytes,
    });
  }

  /**
   * Whether `messages` is what this session's assemble returned earlier in the turn (OpenClaw
   * passes the engine's own output back before each model call), possibly followed by newer
   * messages. Answering it as history would reset the mirror to the assembled view.
   * @param {string} key
   * @param {AgentMessage[]} messages
   */
  #ownOutput(key, messages) {
    const last = this.#bridge.lastOutput.get(key);
    if (last) {
      // An empty answer starts every list too: it was made from an empty history (a new
      // session's first turn), so what comes back in the same turn is the turn's own messages,
      // which commitTurn writes; taken for history, they would reach the mirror twice.
      const n = last.messages.length;
      const prefixOk =
        messages.length >= n &&
        last.messages.every(
          (m, i) => messages[i] === m || fingerprint(messages[i]) === (last.fingerprints[i] ??= fingerprint(m)),
        );
      if (prefixOk) return last;
    }
    if (messages.some(isInserted)) {
      // Our output, but not the last one remembered here (e.g. a later attempt of the turn):
      // never sync it into the mirror.
      return {
        messages: [],
        fingerprints: [],
        estimatedTokens: 0,
        systemPromptAddition: last?.systemPromptAddition,
      };
    }
    return null;
  }

  /**
   * Keeps the answer within the budget, remembers it for the next assemble of the turn.
   * @param {string} key
   * @param {AgentMessage[]} messages
   * @param {number} estimatedTokens
   * @param {string | undefined} systemPromptAddition
   * @param {number | undefined} budget
   * @param {{ history?: AgentMessage[], request?: Record<string, unknown> }} [source] the history
   *   ctxhost assembled this from (in step with the mirror) and the request it used
   */
  #finish(key, messages, estimatedTokens, systemPromptAddition, budget, source = {}) {
    let out = messages;
    let total = estimatedTokens;
    if (budget !== undefined && budget > 0 && estimatedTokens > budget) {
      const fit = fitToBudget(messages, budget, estimatedTokens, isInserted);
      if (fit.dropped > 0) {
        this.#log.warn(
          `ctxhost: assembled context of ${key} is ${estimatedTokens} tokens, over the budget of ${budget}: dropped the ${fit.dropped} oldest message(s) (~${fit.droppedTokens} tokens) client-side`,
        );
      }
      if (fit.total > budget) {
        this.#log.warn(`ctxhost: context of ${key} is still ~${fit.total} tokens, over the budget of ${budget}`);
      }
      out = fit.messages;
      total = fit.total;
    }
    this.#bridge.lastOutput.set(key, {
      messages: out,
      fingerprints: [],
      estimatedTokens: total,
      systemPromptAddition,
      history: source.history,
      request: source.request,
    });
    /** @type {{ messages: AgentMessage[], estimatedTokens: number, systemPromptAddition?: string }} */
    const result = { messages: out, estimatedTokens: total };
    if (systemPromptAddition) result.systemPromptAddition = systemPromptAddition;
    return result;
  }

  /**
   * Compacts the mirror through the active ctxhost engine (no model needed).
   * @param {{ sessionId: string, sessionKey: string, tokenBudget?: number, force?: boolean, customInstructions?: string, abortSignal?: AbortSignal }} params
   */
  async compact(params) {
    return this.#timed("compact", async () => {
      const key = this.#key(params);
      this.#bridge.lastOutput.delete(key);
      try {
        const r = await abortable(
          this.#session(
            key,
            "session.compact",
            compactParams({
              sessionKey: key,
              force: params.force,
              tokenBudget: await this.#compactionBudget(key, params),
              customInstructions: params.customInstructions,
            }),
          ),
          params.abortSignal,
        );
        return {
          ok: r.ok !== false,
          compacted: r.compacted === true,
          ...(r.reason ? { reason: r.reason } : {}),
          result: {
            tokensBefore: r.tokensBefore,
            tokensAfter: r.tokensAfter,
            details: compactParams({
              engine: this.#sidecar.initialized?.engine?.id,
              firstKeptIndex: r.firstKeptIndex ?? undefined,
            }),
          },
        };
      } catch (err) {
        if (params.abortSignal?.aborted) throw err;
        this.#log.warn(`ctxhost: compact of ${key} failed: ${describe(err)}`);
        this.#bridge.failures.record({ operation: "compact", sessionKey: key, message: describe(err) });
        return { ok: false, compacted: false, reason: `ctxhost: ${describe(err)}` };
      }
    });
  }

  /**
   * OpenClaw's budget, never more than ctxhost's window (`agents.defaults.contextWindow`): the
   * server narrows the window to it, but hands an engine that owns its compaction the budget as
   * sent; the pi and Hermes bridges send the narrower of the two as well.
   * @param {string} key
   * @param {{ sessionId: string, tokenBudget?: number }} params
   */
  async #compactionBudget(key, params) {
    if (params.tokenBudget === undefined) return undefined;
    if (!this.#sidecar.initialized) await this.#bootstrap(key, params.sessionId);
    const window = this.#sidecar.initialized?.contextWindow;
    return typeof window === "number" && window > 0 ? Math.min(params.tokenBudget, window) : params.tokenBudget;
  }

  /**
   * Post-turn work of the engine (OpenClaw 2026.9 calls commitTurn instead for normal turns).
   * @param {{ sessionId: string, sessionKey?: string, prePromptMessageCount?: number, autoCompactionSummary?: string, isHeartbeat?: boolean, tokenBudget?: number }} params
   */
  async afterTurn(params) {
    return this.#timed("afterTurn", async () => {
      const key = this.#key(params);
      try {
        await this.#session(
          key,
          "session.afterTurn",
          compactParams({
            sessionKey: key,
            prePromptMessageCount: params.prePromptMessageCount,
            autoCompactionSummary: params.autoCompactionSummary,
            isHeartbeat: params.isHeartbeat,
            tokenBudget: params.tokenBudget,
          }),
        );
      } catch (err) {
        this.#log.warn(`ctxhost: afterTurn of ${key} failed: ${describe(err)}`);
      }
    });
  }

  /**
   * @param {{ parentSessionKey: string, childSessionKey: string, contextMode?: "isolated" | "fork", ttlMs?: number }} params
   * @returns {Promise<{ rollback: () => Promise<void> } | undefined>}
   */
  async prepareSubagentSpawn(params) {
    return this.#timed("prepareSubagentSpawn", async () => {
      const parent = params.parentSessionKey;
      const r = await this.#session(
        parent,
        "subagent.prepareSpawn",
        compactParams({
          sessionKey: parent,
          childSessionKey: params.childSessionKey,
          contextMode: params.contextMode,
          ttlMs: params.ttlMs,
        }),
      );
      this.#bridge.parents.set(params.childSessionKey, parent);
      const handle = r?.rollbackHandle;
      if (handle === null || handle === undefined) return undefined;
      const generation = this.#sidecar.generation;
      return {
        rollback: async () => {
          this.#bridge.parents.delete(params.childSessionKey);
          if (this.#sidecar.generation !== generation) {
            this.#log.warn(
              `ctxhost: subagent spawn of ${params.childSessionKey} not rolled back: the sidecar restarted since it was prepared`,
            );
            return;
          }
          try {
            await this.#sidecar.call("subagent.rollback", { sessionKey: parent, rollbackHandle: handle });
          } catch (err) {
            this.#log.warn(`ctxhost: rollback of subagent ${params.childSessionKey} failed: ${describe(err)}`);
          }
        },
      };
    });
  }

  /**
   * Tells the parent's engine that a subagent ended. The parent is the one this process saw in
   * prepareSubagentSpawn: it is sent as `sessionKey`, so the call reaches the parent also when the
   * server no longer knows the child (it restarted, or the parent's session was closed since);
   * a parent the server does not know is bootstrapped again and the call retried. A child this
   * process never saw prepared is left to the server to place.
   * @param {{ childSessionKey: string, reason: "deleted" | "completed" | "swept" | "released" }} params
   */
  async onSubagentEnded(params) {
    return this.#timed("onSubagentEnded", async () => {
      const child = params.childSessionKey;
      const parent = this.#bridge.parents.get(child);
      const request = { childSessionKey: child, reason: params.reason };
      try {
        if (parent === undefined) await this.#sidecar.call("subagent.ended", request);
        else await this.#session(parent, "subagent.ended", { ...request, sessionKey: parent });
        this.#bridge.parents.delete(child);
      } catch (err) {
        const why =
          parent === undefined && isRpcError(err, codes.UNKNOWN_SESSION)
            ? `${describe(err)}; its spawn was not prepared in this process, so its parent is unknown here`
            : describe(err);
        this.#log.warn(`ctxhost: subagent end of ${child} not delivered: ${why}`);
      }
    });
  }

  /**
   * Closes the sessions this instance opened (OpenClaw disposes its engine after every turn);
   * the sidecar itself stays up for the next turn.
   */
  async dispose() {
    return this.#timed("dispose", async () => {
      const keys = [...this.#opened];
      this.#opened.clear();
      for (const key of keys) {
        this.#bridge.lastOutput.delete(key);
        const refs = (this.#bridge.refs.get(key) ?? 1) - 1;
        if (refs > 0) {
          this.#bridge.refs.set(key, refs);
          continue;
        }
        this.#bridge.refs.delete(key);
        if (!this.#sidecar.running) continue;
        try {
          await this.#sidecar.call("session.close", { sessionKey: key });
        } catch (err) {
          this.#log.warn(`ctxhost: closing ${key} failed: ${describe(err)}`);
        }
      }
    });
  }
}
