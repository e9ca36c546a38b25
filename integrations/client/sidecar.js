// The `ctxhost serve` child and a JSON-RPC 2.0 client for it (newline-delimited JSON over the
// child's stdin/stdout, docs/serve-protocol.md), shared by the OpenClaw plugin and the pi
// extension: one per runtime process.
//
// - Spawned lazily by the first call, never before; `initialize` is the first request of every
//   child.
// - Every call has a deadline covering start-up and the answer. A child that lets a call pass its
//   deadline is taken as wedged and killed (requests of one session run in order on the server,
//   so everything behind the stuck call would wait too); the next call starts a fresh one.
// - A child that exits on its own (crash, kill) fails the calls in flight with
//   `SidecarError("exited")` and is restarted by the next call after a backoff that doubles with
//   each consecutive failure (100 ms … 5 s) and resets after a successful call. Calls arriving
//   while a backoff of more than a second runs fail at once.
// - While no call is in flight the child and its pipes are unref'd, so an idle sidecar never keeps
//   the runtime's event loop alive (OpenClaw's CLI, `pi -p`). When the runtime exits, the child's
//   stdin closes and `ctxhost serve` exits on EOF (it finishes what it has and never leaves a
//   half-written transcript).

import { spawn } from "node:child_process";
import { performance } from "node:perf_hooks";

/** @typedef {{ code: number, message: string, data?: any }} RpcErrorObject */

/** An error the server answered (a JSON-RPC error object). */
export class RpcError extends Error {
  /**
   * @param {string} method
   * @param {RpcErrorObject} error
   */
  constructor(method, error) {
    super(`ctxhost serve: ${method}: ${error.message} (code ${error.code})`);
    this.name = "RpcError";
    this.method = method;
    this.code = error.code;
    this.data = error.data;
    /** The server's own message, without the method and code around it. */
    this.detail = error.message;
  }
}

/** The sidecar could not answer: it could not start, it exited, or the call timed out. */
export class SidecarError extends Error {
  /**
   * @param {"spawn" | "exited" | "timeout" | "closed"} kind
   * @param {string} message
   */
  constructor(kind, message) {
    super(message);
    this.name = "SidecarError";
    this.kind = kind;
  }
}

/**
 * Whether `err` is an RpcError (with `code`, when given). By name, not `instanceof`: a runtime
 * may load this module more than once (OpenClaw does, for a plugin's engine and its tools), and
 * an error from one copy's Sidecar must still be recognised by code from another.
 * @param {unknown} err
 * @param {number} [code]
 * @returns {err is RpcError}
 */
export function isRpcError(err, code) {
  const e = /** @type {any} */ (err);
  return e?.name === "RpcError" && typeof e.code === "number" && (code === undefined || e.code === code);
}

/**
 * Whether `err` is a SidecarError (of `kind`, when given); by name, as `isRpcError`.
 * @param {unknown} err
 * @param {string} [kind]
 * @returns {err is SidecarError}
 */
export function isSidecarError(err, kind) {
  const e = /** @type {any} */ (err);
  return e?.name === "SidecarError" && (kind === undefined || e.kind === kind);
}

/** JSON-RPC error codes of the protocol that the client acts on. */
export const codes = Object.freeze({
  INVALID_PARAMS: -32602,
  UNKNOWN_SESSION: -32001,
  ENGINE_FAULT: -32002,
  OVERFLOW: -32006,
});

/** The `ctxhost serve` protocol this client speaks (docs/serve-protocol.md). */
export const PROTOCOL_VERSION = 1;

const BACKOFF_BASE_MS = 100;
const BACKOFF_MAX_MS = 5000;
const MAX_WAIT_FOR_RESTART_MS = 1000;

/**
 * @typedef {object} CallTiming
 * @property {string} method
 * @property {number} ms wall time of the call, from the request to its answer
 * @property {number} bytesOut bytes of the request line
 * @property {number} bytesIn bytes of the response line (0 when it failed without one)
 * @property {boolean} ok
 */

/**
 * @typedef {object} SidecarOptions
 * @property {string} binary the ctxhost binary (a path, or a name looked up on PATH)
 * @property {string} [binaryHint] added to the error when `binary` does not exist
 * @property {string} [home] CTXHOST_HOME for the child; unset: the environment's
 * @property {number} callTimeoutMs
 * @property {string[]} [args] arguments after the binary (default `["serve"]`)
 * @property {NodeJS.ProcessEnv} [env] the child's environment (default: this process's)
 * @property {{ name: string, version?: string }} [client] sent in `initialize`
 * @property {(message: string) => void} [warn] where the client's own warnings go
 * @property {(line: string) => void} [stderr] where the child's stderr lines go
 * @property {(timing: CallTiming) => void} [onCall]
 * @property {(ms: number, pid: number | undefined) => void} [onSpawn] spawn to `initialize` answered
 * @property {(method: string, params: any) => void} [onNotification] a notification the server
 *   sent (a line with a `method` and no `id`), e.g. `session.compactionPending`
 */

/**
 * What to tell a person about a server notification, or null for one this client does not know
 * (ignored, as JSON-RPC asks).
 * @param {string} method
 * @param {any} params
 * @returns {string | null}
 */
export function describeNotification(method, params) {
  if (method === "session.compactionPending") {
    const fallback = `automatic compaction of session ${params?.sessionKey ?? "?"} is about to run`;
    return `ctxhost: ${typeof params?.message === "string" ? params.message : fallback}`;
  }
  return null;
}

export class Sidecar {
  /** @type {SidecarOptions} */
  #options;
  /** @type {import("node:child_process").ChildProcessWithoutNullStreams | null} */
  #child = null;
  /** @type {Promise<void> | null} */
  #starting = null;
  #ready = false;
  /** @type {Map<number, { method: string, resolve: (v: any) => void, reject: (e: Error) => void, timer: NodeJS.Timeout, start: number, bytesOut: number }>} */
  #pending = new Map();
  #nextId = 0;
  #stdoutBuffer = "";
  #stderrBuffer = "";
  #failures = 0;
  #nextSpawnAt = 0;
  #generation = 0;
  #closing = false;
  /** @type {any} */
  #initialized = null;

  /** @param {SidecarOptions} options */
  constructor(options) {
    this.#options = options;
  }

  /** Whether a child is running (it may still be starting). */
  get running() {
    return this.#child !== null;
  }

  /** The child's pid, when one runs. */
  get pid() {
    return this.#child?.pid;
  }

  /** Increases with every child started: a change means the server forgot its open sessions. */
  get generation() {
    return this.#generation;
  }

  /** The current child's `initialize` result (engine, window, limits), once it answered. */
  get initialized() {
    return this.#initialized;
  }

  /** Calls in flight. */
  get inFlight() {
    return this.#pending.size;
  }

  /**
   * Sends one request and resolves with its result; rejects with `RpcError` for an error answer
   * and `SidecarError` when no answer can come.
   * @param {string} method
   * @param {Record<string, unknown>} [params]
   * @param {{ timeoutMs?: number }} [opts]
   * @returns {Promise<any>}
   */
  async call(method, params = {}, opts = {}) {
    if (this.#closing) throw new SidecarError("closed", "ctxhost serve: the client is shut down");
    const timeoutMs = opts.timeoutMs ?? this.#options.callTimeoutMs;
    const deadline = performance.now() + timeoutMs;
    await this.#ensureStarted(deadline);
    const result = await this.#send(method, params, Math.max(1, deadline - performance.now()), timeoutMs);
    this.#failures = 0;
    return result;
  }

  /**
   * Asks the child to exit (`shutdown`), waits up to `graceMs` for it, then kills it. Later calls
   * fail. For tests and hosts that know they are done.
   * @param {number} [graceMs]
   */
  async shutdown(graceMs = 2000) {
    this.#closing = true;
    const child = this.#child;
    if (!child) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    try {
      if (this.#ready) await this.#send("shutdown", {}, graceMs);
    } catch {
      // exiting anyway
    }
    child.stdin.end();
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    await exited;
    clearTimeout(timer);
  }

  /**
   * Sends a signal to the child (tests use it to simulate a crash or a hang).
   * @param {NodeJS.Signals} [signal]
   */
  kill(signal = "SIGKILL") {
    this.#child?.kill(signal);
  }

  /** @param {number} deadline */
  async #ensureStarted(deadline) {
    while (!this.#ready) {
      if (!this.#starting) {
        this.#starting = this.#start(deadline).finally(() => {
          this.#starting = null;
        });
      }
      await this.#starting;
    }
  }

  /** @param {number} deadline */
  async #start(deadline) {
    const wait = this.#nextSpawnAt - Date.now();
    if (wait > 0) {
      // A short backoff (a crash just now) is waited out, so the caller never notices; during a
      // long one (the child keeps failing) calls fail at once instead of piling up.
      if (wait > MAX_WAIT_FOR_RESTART_MS || performance.now() + wait > deadline) {
        throw new SidecarError(
          "spawn",
          `ctxhost serve: restarting after ${this.#failures} failure(s); next attempt in ${wait} ms`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
    const { binary, home, args = ["serve"], env = process.env } = this.#options;
    const childEnv = { ...env };
    if (home) childEnv.CTXHOST_HOME = home;
    const started = performance.now();
    const child = spawn(binary, args, { stdio: ["pipe", "pipe", "pipe"], env: childEnv });
    this.#child = child;
    this.#generation += 1;
    this.#stdoutBuffer = "";
    this.#stderrBuffer = "";
    child.stdout.setEncoding("utf8");
    child.stderr.setEncoding("utf8");
    child.stdout.on("data", (chunk) => this.#onStdout(child, chunk));
    child.stderr.on("data", (chunk) => this.#onStderr(child, chunk));
    child.stdin.on("error", () => {
      // EPIPE after the child died: its exit handler fails the calls.
    });
    /** @type {Promise<never>} */
    const failed = new Promise((_, reject) => {
      child.once("error", (err) => {
        const hint = /** @type {NodeJS.ErrnoException} */ (err).code === "ENOENT" && this.#options.binaryHint;
        const why = `${err.message}${hint ? ` (${hint})` : ""}`;
        this.#gone(child, `could not run ${binary}: ${why}`, "spawn");
        reject(new SidecarError("spawn", `ctxhost serve: could not run \`${binary}\`: ${why}`));
      });
    });
    failed.catch(() => {});
    child.once("exit", (code, signal) => {
      this.#gone(child, signal ? `killed by ${signal}` : `exited with code ${code}`, "exited");
    });
    try {
      const initialize = this.#send(
        "initialize",
        { protocolVersion: PROTOCOL_VERSION, client: this.#options.client ?? { name: "ctxhost-client" } },
        Math.max(1, deadline - performance.now()),
      );
      const answer = await Promise.race([initialize, failed]);
      if (answer?.protocolVersion !== PROTOCOL_VERSION) {
        throw new SidecarError(
          "spawn",
          `ctxhost serve (${binary}) speaks protocol version ${JSON.stringify(answer?.protocolVersion)}, this client speaks ${PROTOCOL_VERSION}: use a ctxhost binary and an integration of the same release`,
        );
      }
      this.#initialized = answer;
    } catch (err) {
      if (this.#child === child) {
        this.#failures += 1;
        this.#nextSpawnAt = Date.now() + this.#backoffMs();
        this.#child = null;
        child.kill("SIGKILL");
      }
      throw err;
    }
    this.#ready = true;
    this.#options.onSpawn?.(performance.now() - started, child.pid);
  }

  #backoffMs() {
    return this.#failures === 0
      ? 0
      : Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (this.#failures - 1));
  }

  /**
   * @param {string} method
   * @param {Record<string, unknown>} params
   * @param {number} timeoutMs what is left of the call's deadline
   * @param {number} [nominalMs] the call's whole timeout, for the error message
   * @returns {Promise<any>}
   */
  #send(method, params, timeoutMs, nominalMs = timeoutMs) {
    const child = this.#child;
    if (!child) return Promise.reject(new SidecarError("exited", "ctxhost serve is not running"));
    const id = ++this.#nextId;
    const line = `${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`;
    const bytesOut = Buffer.byteLength(line);
    return new Promise((resolve, reject) => {
      const start = performance.now();
      const timer = setTimeout(() => {
        if (!this.#pending.delete(id)) return;
        this.#report(method, performance.now() - start, bytesOut, 0, false);
        reject(
          new SidecarError("timeout", `ctxhost serve: ${method} got no answer within ${Math.round(nominalMs)} ms`),
        );
        this.#wedged(child, method, nominalMs);
      }, timeoutMs);
      this.#pending.set(id, { method, resolve, reject, timer, start, bytesOut });
      this.#setRef(child, true);
      child.stdin.write(line);
    });
  }

  /**
   * @param {import("node:child_process").ChildProcess} child
   * @param {string} method
   * @param {number} timeoutMs
   */
  #wedged(child, method, timeoutMs) {
    if (this.#child !== child) return;
    this.#warn(
      `ctxhost serve (pid ${child.pid}) did not answer ${method} within ${Math.round(timeoutMs)} ms; killing it, the next call starts a new one`,
    );
    this.#gone(child, "killed after a timeout", "timeout");
    child.kill("SIGKILL");
  }

  /**
   * Forgets a child that is gone (or being killed): fails its calls in flight and schedules the
   * restart backoff unless the client is shutting down.
   * @param {import("node:child_process").ChildProcess} child
   * @param {string} why
   * @param {"spawn" | "exited" | "timeout"} kind
   */
  #gone(child, why, kind) {
    if (this.#child !== child) return;
    this.#child = null;
    this.#ready = false;
    this.#initialized = null;
    if (!this.#closing) {
      this.#failures += 1;
      const backoff = this.#backoffMs();
      this.#nextSpawnAt = Date.now() + backoff;
      if (kind === "exited") {
        this.#warn(`ctxhost serve (pid ${child.pid}) ${why}; the next call restarts it (backoff ${backoff} ms)`);
      }
    }
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const call of pending) {
      clearTimeout(call.timer);
      this.#report(call.method, performance.now() - call.start, call.bytesOut, 0, false);
      call.reject(new SidecarError(kind === "timeout" ? "exited" : kind, `ctxhost serve ${why} during ${call.method}`));
    }
    this.#setRef(child, false);
  }

  /**
   * @param {import("node:child_process").ChildProcess} child
   * @param {string} chunk
   */
  #onStdout(child, chunk) {
    if (this.#child !== child) return;
    this.#stdoutBuffer += chunk;
    let newline;
    while ((newline = this.#stdoutBuffer.indexOf("\n")) >= 0) {
      const line = this.#stdoutBuffer.slice(0, newline);
      this.#stdoutBuffer = this.#stdoutBuffer.slice(newline + 1);
      if (line.trim()) this.#onLine(child, line);
    }
  }

  /**
   * @param {import("node:child_process").ChildProcess} child
   * @param {string} line
   */
  #onLine(child, line) {
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      this.#warn(`ctxhost serve wrote a line that is not JSON: ${line.slice(0, 200)}`);
      return;
    }
    if (typeof message?.method === "string" && message.id === undefined) {
      // A notification of the server's own (docs/serve-protocol.md): no answer is owed.
      this.#options.onNotification?.(message.method, message.params ?? {});
      return;
    }
    const call = typeof message?.id === "number" ? this.#pending.get(message.id) : undefined;
    if (!call) {
      this.#warn(`ctxhost serve answered an unknown or expired request id ${JSON.stringify(message?.id)}`);
      return;
    }
    this.#pending.delete(message.id);
    clearTimeout(call.timer);
    if (this.#pending.size === 0) this.#setRef(child, false);
    const ok = !message.error;
    this.#report(call.method, performance.now() - call.start, call.bytesOut, Buffer.byteLength(line) + 1, ok);
    if (ok) call.resolve(message.result);
    else call.reject(new RpcError(call.method, message.error));
  }

  /**
   * @param {import("node:child_process").ChildProcess} child
   * @param {string} chunk
   */
  #onStderr(child, chunk) {
    this.#stderrBuffer += chunk;
    let newline;
    while ((newline = this.#stderrBuffer.indexOf("\n")) >= 0) {
      const line = this.#stderrBuffer.slice(0, newline);
      this.#stderrBuffer = this.#stderrBuffer.slice(newline + 1);
      if (!line.trim()) continue;
      const sink = this.#options.stderr ?? ((l) => process.stderr.write(`[ctxhost serve ${child.pid}] ${l}\n`));
      sink(line);
    }
  }

  /**
   * Holds the runtime's event loop open only while a call waits for its answer.
   * @param {import("node:child_process").ChildProcess} child
   * @param {boolean} on
   */
  #setRef(child, on) {
    for (const stream of [child.stdin, child.stdout, child.stderr]) {
      const socket = /** @type {any} */ (stream);
      if (on) socket?.ref?.();
      else socket?.unref?.();
    }
    if (on) child.ref();
    else child.unref();
  }

  /**
   * @param {string} method
   * @param {number} ms
   * @param {number} bytesOut
   * @param {number} bytesIn
   * @param {boolean} ok
   */
  #report(method, ms, bytesOut, bytesIn, ok) {
    this.#options.onCall?.({ method, ms, bytesOut, bytesIn, ok });
  }

  /** @param {string} message */
  #warn(message) {
    (this.#options.warn ?? ((m) => process.stderr.write(`[ctxhost] ${m}\n`)))(message);
  }
}
