// ctxhost's health as OpenClaw shows it: serve's `health` method (docs/serve-protocol.md), the
// engine the sidecar runs, and the last failure the plugin itself saw (an assemble that fell back
// to OpenClaw's own messages, a commit that failed), read together into one report.
//
// OpenClaw 2026.9.6 gives a plugin no doctor check and no `openclaw status` row of its own. What
// it does give (see README.md, "Health in OpenClaw"):
// - a registered service's `ctx.serviceHealth.reportFailure(error)` / `clearFailure()`: a failure
//   is in the gateway's health snapshot (`plugins.errors`, `failurePhase: "service"`), so
//   `openclaw health`, `openclaw status --deep` and the gateway's `plugins.list` show it
//   (`Plugin ctxhost: failed - service ctxhost-health: …; run openclaw doctor`);
// - a root CLI command (`openclaw ctxhost status`), for setups without a gateway.
// Both read the report built here. It is green only when the sidecar answers, the server says
// `ok`, and the plugin's last failure (if any) was followed by a turn ctxhost served.

/** The service id OpenClaw prints beside the plugin id. */
export const HEALTH_SERVICE_ID = "ctxhost-health";

/** How often the gateway service asks the sidecar, by default. */
export const HEALTH_POLL_MS = 30_000;

/** The longest one-line summary handed to OpenClaw (its text output cuts at 500 characters). */
const SUMMARY_MAX = 480;

/**
 * What the plugin itself saw go wrong, kept per bridge (per sidecar) so status can show it even
 * when the sidecar is gone.
 * @typedef {object} PluginFailure
 * @property {string} at ISO time
 * @property {string} operation the OpenClaw hook: assemble, commitTurn, bootstrap, compact
 * @property {string} [sessionKey]
 * @property {string} message
 * @property {string} [outcome] what OpenClaw got instead, e.g. "its own messages, trimmed to the budget"
 */

/**
 * The last plugin-side failure and the last turn ctxhost served, with listeners (the gateway
 * service re-checks at once instead of at its next poll).
 */
export class FailureLog {
  /** @type {PluginFailure | undefined} */
  last = undefined;
  /** How many failures this process saw. */
  count = 0;
  /** When ctxhost last served an assemble (ISO), after or before `last`. @type {string | undefined} */
  lastServedAt = undefined;
  /** @type {Set<() => void>} */
  #listeners = new Set();
  /** Orders failures and served turns (two in one millisecond included). */
  #seq = 0;
  #failedAt = 0;
  #servedAt = 0;

  /**
   * @param {Omit<PluginFailure, "at">} failure
   */
  record(failure) {
    this.last = { at: new Date().toISOString(), ...failure };
    this.#failedAt = ++this.#seq;
    this.count += 1;
    this.#emit();
  }

  /** A turn ctxhost assembled; tells the listeners only when it ends a failure. */
  served() {
    const recovering = this.last !== undefined && !this.recovered;
    this.lastServedAt = new Date().toISOString();
    this.#servedAt = ++this.#seq;
    if (recovering) this.#emit();
  }

  /** Whether a served turn came after the last failure. */
  get recovered() {
    return this.last !== undefined && this.#servedAt > this.#failedAt;
  }

  /** @param {() => void} listener @returns {() => void} to unsubscribe */
  subscribe(listener) {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #emit() {
    for (const listener of [...this.#listeners]) {
      try {
        listener();
      } catch {
        // a listener's trouble is its own
      }
    }
  }
}

/**
 * @typedef {object} HealthReport
 * @property {boolean} ok green: the sidecar answered `ok` and no unrecovered plugin failure
 * @property {"ok" | "degraded" | "down"} status `down`: the sidecar did not answer `health`
 * @property {string} checkedAt ISO time
 * @property {string} [configuredEngine] the engine ctxhost's config selects
 * @property {string} [runningEngine] the engine the sidecar runs (differs under a fallback)
 * @property {string | null} [contract] the configured engine's contract, once loaded
 * @property {boolean | null} [circuitOpen] the configured engine's circuit breaker (null: not loaded)
 * @property {{ engine: string, cause: string }[]} quarantined
 * @property {{ open: number, recorded: number, turns: number, degradedTurns: number } | undefined} sessions
 * @property {{ sessionKey: string, health: any }[]} degradedSessions
 * @property {any} [session] the server's answer about the session asked for
 * @property {{ at?: string, sessionKey?: string, outcome?: string, message: string } | undefined} lastError
 *   the newest error the server recorded for a turn
 * @property {PluginFailure | undefined} pluginFailure the plugin's own last failure
 * @property {boolean} pluginRecovered whether ctxhost served a turn after it
 * @property {string} [error] why the sidecar did not answer
 * @property {any} [server] serve's whole `health` answer
 */

/** @param {unknown} err */
function describe(err) {
  return err instanceof Error ? err.message : String(err);
}

/**
 * The newest recorded turn error among the degraded sessions (and the session asked for).
 * @param {any} health serve's answer
 */
function newestError(health) {
  /** @type {{ at?: string, sessionKey?: string, outcome?: string, message: string } | undefined} */
  let newest;
  const consider = (/** @type {string} */ sessionKey, /** @type {any} */ h) => {
    const e = h?.lastError;
    if (!e || typeof e.message !== "string") return;
    if (!newest || String(e.at ?? "") > String(newest.at ?? "")) newest = { at: e.at, sessionKey, outcome: e.outcome, message: e.message };
  };
  for (const s of health?.degradedSessions ?? []) consider(s.sessionKey, s.health);
  if (health?.session?.health) consider(health.session.sessionKey, health.session.health);
  return newest;
}

/**
 * Asks the sidecar for its health (starting it if need be: a sidecar that cannot start is what
 * must not read green) and reads the answer with the plugin's own failures.
 * @param {{ sidecar: import("../client/sidecar.js").Sidecar, failures?: FailureLog }} source
 * @param {{ sessionKey?: string, timeoutMs?: number }} [opts]
 * @returns {Promise<HealthReport>}
 */
export async function checkHealth(source, opts = {}) {
  const { sidecar, failures } = source;
  const checkedAt = new Date().toISOString();
  const pluginFailure = failures?.last;
  const pluginRecovered = failures?.recovered ?? false;
  /** @type {any} */
  let health;
  try {
    health = await sidecar.call("health", opts.sessionKey ? { sessionKey: opts.sessionKey } : {}, { timeoutMs: opts.timeoutMs });
  } catch (err) {
    return {
      ok: false,
      status: "down",
      checkedAt,
      quarantined: [],
      sessions: undefined,
      degradedSessions: [],
      lastError: undefined,
      pluginFailure,
      pluginRecovered,
      error: describe(err),
    };
  }
  const serverOk = health?.status === "ok";
  const unrecovered = pluginFailure !== undefined && !pluginRecovered;
  return {
    ok: serverOk && !unrecovered,
    status: serverOk && !unrecovered ? "ok" : "degraded",
    checkedAt,
    configuredEngine: health?.engine?.configured,
    runningEngine: sidecar.initialized?.engine?.id,
    contract: health?.engine?.contract ?? null,
    circuitOpen: health?.engine?.circuitOpen ?? null,
    quarantined: Array.isArray(health?.quarantined) ? health.quarantined : [],
    sessions: health?.sessions,
    degradedSessions: Array.isArray(health?.degradedSessions) ? health.degradedSessions : [],
    ...(health?.session ? { session: health.session } : {}),
    lastError: newestError(health),
    pluginFailure,
    pluginRecovered,
    server: health,
  };
}

/** @param {string} text @param {number} max */
function cut(text, max) {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * One line for OpenClaw's plugin error (what `openclaw health` prints after "failed - service
 * ctxhost-health:"), naming what is wrong first.
 * @param {HealthReport} report
 */
export function summarize(report) {
  /** @type {string[]} */
  const parts = [];
  if (report.status === "down") {
    parts.push(`ctxhost is not running: ${report.error ?? "no answer"}`);
  } else {
    parts.push(`ctxhost ${report.status}`);
    for (const q of report.quarantined) parts.push(`engine \`${q.engine}\` quarantined: ${cut(q.cause, 160)}`);
    if (report.runningEngine && report.configuredEngine && report.runningEngine !== report.configuredEngine) {
      parts.push(`\`${report.runningEngine}\` serves instead of \`${report.configuredEngine}\``);
    }
    if (report.circuitOpen) parts.push(`circuit breaker of \`${report.configuredEngine}\` open`);
    const s = report.sessions;
    if (s && s.degradedTurns > 0) parts.push(`${s.degradedTurns} of ${s.turns} turns degraded`);
    if (report.lastError) parts.push(`last error: ${cut(report.lastError.message, 160)}`);
  }
  const f = report.pluginFailure;
  if (f && !report.pluginRecovered) parts.push(`plugin: ${f.operation} failed at ${f.at}: ${cut(f.message, 160)}`);
  return cut(parts.join("; "), SUMMARY_MAX);
}

/**
 * The report as lines for a terminal (`openclaw ctxhost status`).
 * @param {HealthReport} report
 * @returns {string[]}
 */
export function formatReport(report) {
  const mark = report.ok ? "OK" : report.status === "down" ? "DOWN" : "DEGRADED";
  /** @type {string[]} */
  const lines = [`ctxhost: ${mark}`];
  if (report.status === "down") {
    lines.push(`  sidecar: not answering: ${report.error ?? "no answer"}`);
  } else {
    const running = report.runningEngine && report.runningEngine !== report.configuredEngine ? ` (serving: ${report.runningEngine})` : "";
    lines.push(`  engine: ${report.configuredEngine ?? "?"}${running}${report.contract ? `, contract ${report.contract}` : ""}`);
    lines.push(`  circuit breaker: ${report.circuitOpen === null || report.circuitOpen === undefined ? "not loaded" : report.circuitOpen ? "OPEN" : "closed"}`);
    if (report.quarantined.length === 0) lines.push("  quarantined: none");
    for (const q of report.quarantined) lines.push(`  quarantined: ${q.engine}: ${q.cause}`);
    const s = report.sessions;
    if (s) lines.push(`  turns (this sidecar): ${s.turns}, degraded ${s.degradedTurns}; sessions open ${s.open}, recorded ${s.recorded}`);
    for (const d of report.degradedSessions) {
      const h = d.health ?? {};
      lines.push(`  degraded session ${d.sessionKey}: ${h.degradedTurns ?? "?"} of ${h.turns ?? "?"} turns, last ${h.lastOutcome ?? "?"} (engine ${h.engine ?? "?"})`);
    }
    if (report.session) {
      const ss = report.session;
      lines.push(
        ss.known
          ? `  session ${ss.sessionKey}: ${ss.health?.turns ?? "?"} turns, ${ss.health?.degradedTurns ?? "?"} degraded, last ${ss.health?.lastOutcome ?? "?"}`
          : `  session ${ss.sessionKey}: ${ss.message ?? "not known to this sidecar"}`,
      );
    }
    if (report.lastError) {
      const e = report.lastError;
      lines.push(`  last error: ${e.at ?? "?"} ${e.sessionKey ?? ""} ${e.outcome ?? ""}: ${e.message}`.replace(/ +/g, " "));
    }
  }
  const f = report.pluginFailure;
  if (f) {
    const state = report.pluginRecovered ? "recovered since" : "not recovered";
    lines.push(`  plugin's last failure (${state}): ${f.at} ${f.operation}${f.sessionKey ? ` of ${f.sessionKey}` : ""}: ${f.message}${f.outcome ? `; OpenClaw got ${f.outcome}` : ""}`);
  }
  return lines;
}

/**
 * The gateway service: checks now, every `pollMs`, and at once when the plugin sees a failure or
 * a recovery; reports a report that is not green as the service's failure, clears it when green.
 * @param {() => { sidecar: import("../client/sidecar.js").Sidecar, failures?: FailureLog }} sourceFor
 * @param {{ pollMs?: number, timeoutMs?: number, log?: { warn: (m: string) => void, info: (m: string) => void } }} [opts]
 */
export function healthService(sourceFor, opts = {}) {
  const pollMs = opts.pollMs ?? HEALTH_POLL_MS;
  /** @type {NodeJS.Timeout | undefined} */
  let timer;
  /** @type {(() => void) | undefined} */
  let unsubscribe;
  let generation = 0;
  let running = false;
  let again = false;
  /** @type {HealthReport | undefined} */
  let latest;

  /** @param {any} ctx @param {number} gen */
  const run = async (ctx, gen) => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      do {
        again = false;
        const report = await checkHealth(sourceFor(), { timeoutMs: opts.timeoutMs });
        if (gen !== generation) return;
        const was = latest;
        latest = report;
        if (report.ok) {
          ctx?.serviceHealth?.clearFailure?.();
          if (was && !was.ok) opts.log?.info(`ctxhost: healthy again (${summarize(report)})`);
        } else {
          const summary = summarize(report);
          ctx?.serviceHealth?.reportFailure?.(new Error(summary));
          if (!was || was.ok || summarize(was) !== summary) opts.log?.warn(`ctxhost: not healthy: ${summary}`);
        }
      } while (again && gen === generation);
    } finally {
      running = false;
    }
  };

  return {
    id: HEALTH_SERVICE_ID,
    /** @param {any} ctx OpenClawPluginServiceContext */
    start(ctx) {
      const gen = ++generation;
      const tick = () => void run(ctx, gen).catch(() => {});
      unsubscribe?.();
      unsubscribe = sourceFor().failures?.subscribe(tick);
      clearInterval(timer);
      timer = setInterval(tick, pollMs);
      timer.unref?.();
      tick();
    },
    stop() {
      generation += 1;
      clearInterval(timer);
      timer = undefined;
      unsubscribe?.();
      unsubscribe = undefined;
    },
    /** The last report (tests, and anything else in the process that wants it). */
    get latest() {
      return latest;
    },
  };
}
