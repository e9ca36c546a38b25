// OpenClaw plugin entry: registers the context engine "ctxhost", which runs the engine selected in
// ctxhost's own config (`plugins.slots.contextEngine` in $CTXHOST_HOME/ctxhost.json) inside one
// `ctxhost serve` sidecar per OpenClaw process.
//
// It also registers ctxhost's recall tools, `ctx_search` and `ctx_expand` (src/tools.js), whose
// calls go to the same sidecar, and ctxhost's health where OpenClaw 2026.9.6 lets a plugin show
// it (src/health.js): a gateway service that reports a sidecar that is down, a quarantined
// engine, an open circuit breaker or a turn that fell back as the plugin's failure (in
// `openclaw health`, `openclaw status --deep`, the gateway's plugins.list), and `openclaw ctxhost status`.
//
// register() may run several times per process (full and discovery registrations): it only
// registers factories. Nothing is spawned until an engine hook or a tool call needs the sidecar.

import { readFileSync } from "node:fs";
import { resolveConfig } from "./client/config.js";
import { Bridge, CtxhostContextEngine, ENGINE_ID } from "./src/engine.js";
import { Sidecar, describeNotification } from "./client/sidecar.js";
import { createTiming, timingEnabled } from "./client/timing.js";
import { RECALL_TOOL_NAMES, openclawTools } from "./src/tools.js";
import { healthService } from "./src/health.js";
import { CLI_DESCRIPTOR, addStatusCommand } from "./src/status-command.js";

const VERSION = (() => {
  try {
    return JSON.parse(readFileSync(new URL("./package.json", import.meta.url), "utf8")).version;
  } catch {
    return undefined;
  }
})();

/**
 * One bridge (sidecar + shared session state) per CTXHOST_HOME, per process. Kept on
 * globalThis: OpenClaw 2026.9 loads a plugin's module more than once in one process (the engine
 * and the tools came from different copies, each starting its own sidecar on the same mirror).
 * @type {Map<string, Bridge>}
 */
const bridges = /** @type {any} */ (globalThis)[Symbol.for("ctxhost.openclaw.bridges")] ??= new Map();

/**
 * @param {import("./src/config.js").BridgeConfig} config
 * @param {{ info: (m: string) => void, warn: (m: string) => void }} log
 */
function bridgeFor(config, log) {
  // One sidecar per home: `ctxhost serve` serves a home to one process at a time, and copies of
  // this module loaded from different folders resolve the platform package's binary to
  // different paths of the same release.
  const key = config.home;
  let bridge = bridges.get(key);
  if (!bridge) {
    const timing = createTiming(timingEnabled());
    const sidecar = new Sidecar({
      binary: config.binary,
      binaryHint: config.binaryHint,
      home: config.home,
      callTimeoutMs: config.callTimeoutMs,
      client: { name: "openclaw-ctxhost", version: VERSION },
      warn: (m) => log.warn(m),
      onCall: timing.onCall,
      onSpawn: timing.onSpawn,
      onNotification: (method, params) => {
        const text = describeNotification(method, params);
        if (text) log.info(text);
      },
    });
    bridge = new Bridge(sidecar, log, timing);
    bridges.set(key, bridge);
  }
  return bridge;
}

/**
 * @param {any} logger OpenClaw's PluginLogger, when there is one
 */
function makeLog(logger) {
  const write = (/** @type {string} */ m) => process.stderr.write(`${m}\n`);
  return {
    info: (/** @type {string} */ m) => (logger?.info ? logger.info(m) : write(m)),
    warn: (/** @type {string} */ m) => (logger?.warn ? logger.warn(m) : write(m)),
  };
}

export default {
  id: ENGINE_ID,
  name: "ctxhost",
  description: "Context engine backed by a ctxhost sidecar running sandboxed wasm engines",
  /** @param {any} api OpenClawPluginApi */
  register(api) {
    const log = makeLog(api.logger);
    const pluginConfig = api.pluginConfig;
    const mode = api.registrationMode;
    if (typeof api.registerCli === "function" && (mode === undefined || mode === "full" || mode === "discovery" || mode === "cli-metadata")) {
      api.registerCli(
        (/** @type {any} */ ctx) => {
          addStatusCommand(ctx.program, () => resolveConfig(pluginConfig), VERSION);
        },
        { descriptors: [{ ...CLI_DESCRIPTOR }] },
      );
    }
    // Collecting CLI metadata, OpenClaw refuses runtime registrations.
    if (mode === "cli-metadata") return;
    api.registerContextEngine(ENGINE_ID, () => {
      const config = resolveConfig(pluginConfig);
      return new CtxhostContextEngine(bridgeFor(config, log), { version: VERSION });
    });
    if (typeof api.registerTool === "function") {
      api.registerTool((/** @type {any} */ ctx) => openclawTools(() => bridgeFor(resolveConfig(pluginConfig), log).sidecar, ctx), {
        names: [...RECALL_TOOL_NAMES],
      });
    }
    // Services run in a gateway only (never in `openclaw agent --local`), from the full
    // registration; start() returns at once, its checks run in the background (the first one
    // starts the sidecar: one that cannot start must not read green).
    if (typeof api.registerService === "function" && (mode === undefined || mode === "full")) {
      api.registerService(
        healthService(() => {
          const bridge = bridgeFor(resolveConfig(pluginConfig), log);
          return { sidecar: bridge.sidecar, failures: bridge.failures };
        }, { log }),
      );
    }
  },
};

export { resolveConfig } from "./client/config.js";
export { Bridge, CtxhostContextEngine } from "./src/engine.js";
export { Sidecar } from "./client/sidecar.js";
export { callSessionTool } from "./client/tools.js";
export { RECALL_TOOLS, openclawTools } from "./src/tools.js";
export { FailureLog, checkHealth, formatReport, healthService, summarize } from "./src/health.js";
export { runStatus } from "./src/status-command.js";
