// Where the sidecar comes from: the ctxhost binary, CTXHOST_HOME and the call timeout, with
// defaults (the OpenClaw plugin reads them from `plugins.entries.ctxhost.config` in openclaw.json,
// the pi extension from its flags and the environment).

import { homedir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";

export const DEFAULT_CALL_TIMEOUT_MS = 30_000;

/**
 * @typedef {object} BridgeConfig
 * @property {string} binary the ctxhost binary: an absolute path, or a name looked up on PATH
 * @property {string} home CTXHOST_HOME handed to the sidecar
 * @property {number} callTimeoutMs
 */

/**
 * @param {string} path
 * @returns {string}
 */
function expandHome(path) {
  if (path === "~") return homedir();
  if (path.startsWith("~/")) return join(homedir(), path.slice(2));
  return path;
}

/**
 * Resolves the plugin config: `home` wins over `$CTXHOST_HOME`, which wins over `~/.ctxhost`.
 * A relative `binary` containing a slash is resolved against the working directory; a bare
 * name is left to PATH.
 * @param {Record<string, unknown> | undefined} pluginConfig
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {BridgeConfig}
 */
export function resolveConfig(pluginConfig, env = process.env) {
  const config = pluginConfig ?? {};
  const str = (/** @type {unknown} */ v) => (typeof v === "string" && v.trim() !== "" ? v.trim() : undefined);
  let binary = expandHome(str(config.binary) ?? "ctxhost");
  if (!isAbsolute(binary) && binary.includes("/")) binary = resolve(binary);
  const home = resolve(expandHome(str(config.home) ?? str(env.CTXHOST_HOME) ?? join(homedir(), ".ctxhost")));
  const timeout = Number(config.callTimeoutMs);
  const callTimeoutMs = Number.isFinite(timeout) && timeout > 0 ? Math.floor(timeout) : DEFAULT_CALL_TIMEOUT_MS;
  return { binary, home, callTimeoutMs };
}
