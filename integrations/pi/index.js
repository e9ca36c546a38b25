// pi extension: the engine in ctxhost's slot (`plugins.slots.contextEngine` in
// $CTXHOST_HOME/ctxhost.json) becomes the context engine of the pi session, through one
// `ctxhost serve` sidecar per pi process.
//
//   context                 → what the engine assembled replaces pi's messages for that call
//   before_provider_request → the engine's system prompt addition (a gauge) joins the request
//   session_before_compact  → ctxhost compacts; pi writes the engine's summary as its own entry
//   session_start           → the session opens on the sidecar; its tools become pi tools
//   agent_end               → the prompt's last messages reach the mirror
//
// Settings: `--ctxhost-bin PATH` (else $CTXHOST_BIN, else the platform package's binary, else
// `ctxhost` on PATH), `--ctxhost-home DIR`
// (else $CTXHOST_HOME, else ~/.ctxhost), $CTXHOST_CALL_TIMEOUT_MS (default 30000).
//
// Nothing here may break a pi turn: every handler catches what fails, says so once, and leaves
// pi to do what it would do without the extension (its own messages, its own compaction). The
// sidecar restarts with a backoff (client/sidecar.js); pi's session file keeps everything,
// and the mirror catches up from it at the next call.

import { readFileSync } from "node:fs";
import { resolveConfig } from "./client/config.js";
import { Sidecar, describeNotification } from "./client/sidecar.js";
import { createTiming, timingEnabled } from "./client/timing.js";
import { compactionBudget } from "./src/compaction.js";
import { withSystemAddition } from "./src/payload.js";
import { PiSession } from "./src/session.js";
import { registerTools } from "./src/tools.js";

const VERSION = (() => {
  try {
    return JSON.parse(readFileSync(new URL("./package.json", import.meta.url), "utf8")).version;
  } catch {
    return undefined;
  }
})();

/** One sidecar per distinct config per process, also across reloads of this module. */
const SIDECARS = Symbol.for("ctxhost.pi.sidecars");

/** @param {unknown} err */
function describe(err) {
  return err instanceof Error ? err.message : String(err);
}

/**
 * @param {import("./client/config.js").BridgeConfig} config
 * @param {{ info: (m: string) => void, warn: (m: string) => void }} log
 * @returns {{ sidecar: Sidecar, timing: ReturnType<typeof createTiming> }}
 */
function sidecarFor(config, log) {
  const all = /** @type {Map<string, { sidecar: Sidecar, timing: ReturnType<typeof createTiming> }>} */ (
    /** @type {any} */ (globalThis)[SIDECARS] ??= new Map()
  );
  // One sidecar per home: `ctxhost serve` serves a home to one process at a time, and copies of
  // this module loaded from different folders resolve the platform package's binary to
  // different paths of the same release.
  const key = config.home;
  let entry = all.get(key);
  if (!entry) {
    const timing = createTiming(timingEnabled());
    const sidecar = new Sidecar({
      binary: config.binary,
      binaryHint: config.binaryHint,
      home: config.home,
      callTimeoutMs: config.callTimeoutMs,
      client: { name: "pi-ctxhost", version: VERSION },
      warn: (m) => log.warn(`ctxhost: ${m}`),
      onCall: timing.onCall,
      onSpawn: timing.onSpawn,
      onNotification: (method, params) => {
        const text = describeNotification(method, params);
        if (text) log.info(text);
      },
    });
    entry = { sidecar, timing };
    all.set(key, entry);
  }
  return entry;
}

/**
 * Where messages go: stderr in print and JSON modes, pi's notifications in the interactive UI.
 * A warning repeated word for word is said once until another one comes.
 */
function createLog() {
  /** @type {any} */
  let ui = null;
  let lastWarning = "";
  const write = (/** @type {string} */ m) => process.stderr.write(`${m}\n`);
  return {
    /** @param {any} ctx */
    bind(ctx) {
      try {
        ui = ctx?.hasUI ? ctx.ui : null;
      } catch {
        ui = null;
      }
    },
    /** @param {string} m */
    info(m) {
      if (ui) ui.notify(m, "info");
      else write(m);
    },
    /** @param {string} m */
    warn(m) {
      if (m === lastWarning) return;
      lastWarning = m;
      if (ui) ui.notify(m, "warning");
      else write(m);
    },
  };
}

/** @param {any} ctx */
function modelOf(ctx) {
  try {
    const model = ctx?.model;
    return model?.id ? { provider: model.provider, id: model.id } : undefined;
  } catch {
    return undefined;
  }
}

/** @param {any} ctx */
function windowOf(ctx) {
  try {
    const window = ctx?.model?.contextWindow;
    return typeof window === "number" && window > 0 ? window : undefined;
  } catch {
    return undefined;
  }
}

/** @param {any} pi ExtensionAPI */
export default function ctxhostExtension(pi) {
  pi.registerFlag("ctxhost-bin", { description: "The ctxhost binary (default: $CTXHOST_BIN, else the binary of the installed @ctxhost/cli-<platform> package, else ctxhost on PATH)", type: "string" });
  pi.registerFlag("ctxhost-home", { description: "CTXHOST_HOME for the ctxhost sidecar (default: $CTXHOST_HOME, else ~/.ctxhost)", type: "string" });

  const log = createLog();
  /** @type {{ session: PiSession, toolsListed: boolean, addition?: string, tokenBudget?: number, model?: { provider?: string, id: string } } | null} */
  let state = null;
  /** Tool names this extension registered with pi. */
  const registered = new Set();
  let warnedPayload = false;

  const flag = (/** @type {string} */ name) => {
    const v = pi.getFlag?.(name);
    return typeof v === "string" && v.trim() !== "" ? v : undefined;
  };
  const bridge = () =>
    sidecarFor(
      resolveConfig({
        binary: flag("ctxhost-bin") ?? process.env.CTXHOST_BIN,
        home: flag("ctxhost-home"),
        callTimeoutMs: process.env.CTXHOST_CALL_TIMEOUT_MS,
      }),
      log,
    );

  /**
   * The session of `ctx`, created on first use (key `pi:<session id>`).
   * @param {any} ctx
   */
  const sessionOf = (ctx) => {
    const key = `pi:${ctx.sessionManager.getSessionId()}`;
    if (state?.session.key !== key) {
      const manager = ctx.sessionManager;
      state = {
        session: new PiSession({ sidecar: bridge().sidecar, key, log, branch: () => manager.getBranch() }),
        toolsListed: false,
      };
    }
    return state.session;
  };

  /**
   * Times a handler for CTXHOST_BRIDGE_TIMING=1.
   * @template T
   * @param {string} name
   * @param {() => Promise<T>} run
   */
  const timed = async (name, run) => {
    let timing;
    try {
      timing = bridge().timing;
    } catch {
      return run();
    }
    if (!timing.enabled) return run();
    const start = performance.now();
    try {
      return await run();
    } finally {
      timing.hook(name, performance.now() - start);
    }
  };

  /** Registers the session's tools once it answers `session.tools`. @param {PiSession} session */
  const ensureTools = async (session) => {
    if (!state || state.toolsListed) return;
    const { tools } = await session.call("session.tools", { sessionKey: session.key });
    registerTools(pi, Array.isArray(tools) ? tools : [], registered, () => (state ? { sidecar: state.session.sidecar, key: state.session.key } : null), (m) => log.warn(m));
    state.toolsListed = true;
  };

  pi.on("session_start", async (/** @type {any} */ _event, /** @type {any} */ ctx) =>
    timed("session_start", async () => {
      log.bind(ctx);
      let key = "the session";
      try {
        const session = sessionOf(ctx);
        key = session.key;
        await session.open(ctx.sessionManager.getSessionId());
        await ensureTools(session);
      } catch (err) {
        log.warn(`ctxhost: cannot open ${key} on the sidecar (${describe(err)}); pi uses its own context until ctxhost answers`);
      }
    }),
  );

  pi.on("context", async (/** @type {any} */ event, /** @type {any} */ ctx) =>
    timed("context", async () => {
      log.bind(ctx);
      let key = "the session";
      try {
        const session = sessionOf(ctx);
        key = session.key;
        const s = /** @type {NonNullable<typeof state>} */ (state);
        s.tokenBudget = windowOf(ctx);
        s.model = modelOf(ctx);
        s.addition = undefined;
        const r = await session.context(event.messages ?? [], { tokenBudget: s.tokenBudget, model: s.model });
        s.addition = r.systemPromptAddition;
        if (!s.toolsListed) {
          try {
            await ensureTools(session);
          } catch (err) {
            log.warn(`ctxhost: the tools of ${key} are not available (${describe(err)})`);
          }
        }
        return { messages: r.messages };
      } catch (err) {
        log.warn(`ctxhost: assembling the context of ${key} failed (${describe(err)}); pi sends its own messages this time`);
        return undefined;
      }
    }),
  );

  pi.on("before_provider_request", (/** @type {any} */ event) => {
    const addition = state?.addition;
    if (state) state.addition = undefined;
    if (!addition) return undefined;
    const next = withSystemAddition(event.payload, addition);
    if (!next && !warnedPayload) {
      warnedPayload = true;
      log.warn("ctxhost: this provider's request has no system prompt ctxhost knows how to extend; the engine's addition (e.g. its gauge) is left out");
    }
    return next ?? undefined;
  });

  pi.on("session_before_compact", async (/** @type {any} */ event, /** @type {any} */ ctx) =>
    timed("session_before_compact", async () => {
      log.bind(ctx);
      let key = "the session";
      try {
        // After session_shutdown (pi may compact after its last prompt) ctx is stale: the
        // session from the last call is used, and the event carries the branch.
        const session = state?.session ?? sessionOf(ctx);
        key = session.key;
        // pi compacts once the context passes its window less its reserve: that is the window
        // ctxhost compacts for (with the whole window, its compaction may find nothing to do),
        // less a margin when the model refused what ctxhost counted as fitting.
        const window = state?.tokenBudget ?? windowOf(ctx);
        const tokenBudget = compactionBudget(window, event?.preparation?.settings?.reserveTokens, event?.reason, session.sidecar.initialized?.contextWindow);
        const { compacted, answer, skipped, reused } = await session.compaction(event, {
          tokenBudget,
          model: state?.model,
          engine: session.sidecar.initialized?.engine?.id,
        });
        if (!answer) {
          if (skipped) return { cancel: true };
          log.warn(`ctxhost: the engine has no compaction of ${key} to offer (${compacted?.reason ?? "nothing to compact"}); pi's compaction is cancelled`);
          return { cancel: true };
        }
        if (!reused) {
          log.info(`ctxhost: compacted ${key} with ${session.sidecar.initialized?.engine?.id ?? "its engine"}: ${answer.tokensBefore} → ${compacted?.tokensAfter ?? "?"} tokens`);
        }
        return { compaction: answer };
      } catch (err) {
        log.warn(`ctxhost: compacting ${key} through ctxhost failed (${describe(err)}); pi compacts with its own summarizer`);
        return undefined;
      }
    }),
  );

  pi.on("agent_end", async (/** @type {any} */ event) =>
    timed("agent_end", async () => {
      try {
        await state?.session.settle(event.messages ?? []);
      } catch (err) {
        log.warn(`ctxhost: the last messages of ${state?.session.key} reach the mirror at the next call (${describe(err)})`);
      }
    }),
  );

  pi.on("session_shutdown", async (/** @type {any} */ event) => {
    const session = state?.session;
    // On quit the process ends and the sidecar with it; on a switch to another session this
    // one's engine instance is disposed now.
    if (!session || event?.reason === "quit") return;
    state = null;
    try {
      await session.close();
    } catch (err) {
      log.warn(`ctxhost: closing ${session.key} failed: ${describe(err)}`);
    }
  });
}
