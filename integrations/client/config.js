// Where the sidecar comes from: the ctxhost binary, CTXHOST_HOME and the call timeout, with
// defaults (the OpenClaw plugin reads them from `plugins.entries.ctxhost.config` in openclaw.json,
// the pi extension from its flags and the environment).

import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";

export const DEFAULT_CALL_TIMEOUT_MS = 30_000;

/**
 * @typedef {object} BridgeConfig
 * @property {string} binary the ctxhost binary: an absolute path, or a name looked up on PATH
 * @property {string} [binaryHint] what to do when `binary` cannot be run (set when no binary was
 *   configured and no platform package is installed)
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

/** The platforms a prebuilt binary package is published for (`@ctxhost/cli-<platform>-<arch>`). */
export const PREBUILT_PLATFORMS = ["linux-x64"];

/**
 * The npm package holding the prebuilt binary for a platform, esbuild's layout: the integration
 * lists every such package in `optionalDependencies` and npm installs the one whose `os`/`cpu`
 * match the machine.
 * @param {string} [platform]
 * @param {string} [arch]
 */
export function platformPackage(platform = process.platform, arch = process.arch) {
  return `@ctxhost/cli-${platform}-${arch}`;
}

/**
 * The binary inside the installed platform package, resolved the way Node resolves an import
 * from `from` (the integration's own directory); undefined when that package is not installed.
 * @param {string | URL} [from]
 * @param {string} [platform]
 * @param {string} [arch]
 * @returns {string | undefined}
 */
export function packagedBinary(from = import.meta.url, platform = process.platform, arch = process.arch) {
  let manifest;
  try {
    manifest = createRequire(from).resolve(`${platformPackage(platform, arch)}/package.json`);
  } catch {
    return undefined;
  }
  const binary = join(dirname(manifest), "bin", "ctxhost");
  return existsSync(binary) ? binary : undefined;
}

/**
 * What to tell a user whose machine has no ctxhost binary where the integration looks.
 * @param {string} [platform]
 * @param {string} [arch]
 */
export function missingBinaryHint(platform = process.platform, arch = process.arch) {
  const here = `${platform}-${arch}`;
  const why = PREBUILT_PLATFORMS.includes(here)
    ? `the package ${platformPackage(platform, arch)} (an optional dependency) is not installed: reinstall without --omit=optional`
    : `no prebuilt ctxhost is published for ${here} (only ${PREBUILT_PLATFORMS.join(", ")})`;
  return `${why}; or install ctxhost from a release tarball or from source (cargo install --locked --path cli in a checkout) and put it on PATH, or set the binary setting to its path`;
}

/**
 * Resolves the plugin config: `home` wins over `$CTXHOST_HOME`, which wins over `~/.ctxhost`.
 * A configured `binary` wins over the platform package's, which wins over `ctxhost` on PATH. A
 * relative `binary` containing a slash is resolved against the working directory; a bare name
 * is left to PATH.
 * @param {Record<string, unknown> | undefined} pluginConfig
 * @param {NodeJS.ProcessEnv} [env]
 * @param {() => string | undefined} [packaged] the platform package's binary (tests stand in)
 * @returns {BridgeConfig}
 */
export function resolveConfig(pluginConfig, env = process.env, packaged = packagedBinary) {
  const config = pluginConfig ?? {};
  const str = (/** @type {unknown} */ v) => (typeof v === "string" && v.trim() !== "" ? v.trim() : undefined);
  const configured = str(config.binary);
  const fromPackage = configured ? undefined : packaged();
  let binary = expandHome(configured ?? fromPackage ?? "ctxhost");
  if (!isAbsolute(binary) && binary.includes("/")) binary = resolve(binary);
  const home = resolve(expandHome(str(config.home) ?? str(env.CTXHOST_HOME) ?? join(homedir(), ".ctxhost")));
  const timeout = Number(config.callTimeoutMs);
  const callTimeoutMs = Number.isFinite(timeout) && timeout > 0 ? Math.floor(timeout) : DEFAULT_CALL_TIMEOUT_MS;
  if (configured || fromPackage) return { binary, home, callTimeoutMs };
  return { binary, home, callTimeoutMs, binaryHint: missingBinaryHint() };
}
