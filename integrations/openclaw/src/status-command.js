// `openclaw ctxhost status [--json]`: ctxhost's health where no gateway runs
// (an `openclaw agent --local` setup has no plugin services, so nothing else would ask). It
// starts its own short-lived sidecar with the plugin's settings, asks `health`, prints the report
// and exits 1 unless it is green: a sidecar that cannot start, a quarantined engine or an open
// circuit breaker all fail it.

import { Sidecar } from "../client/sidecar.js";
import { checkHealth, formatReport } from "./health.js";

/** The root command's parse-time descriptor (also in openclaw.plugin.json's `cliCommands`). */
export const CLI_DESCRIPTOR = Object.freeze({
  name: "ctxhost",
  description: "ctxhost context engine: the health of its sidecar (engine, quarantines, degraded turns)",
  hasSubcommands: true,
});

/**
 * Runs the check once and prints it.
 * @param {import("../client/config.js").BridgeConfig} config
 * @param {{ json?: boolean }} opts
 * @param {{ out: (s: string) => void, version?: string }} io
 * @returns {Promise<number>} the exit code: 0 green, 1 not
 */
export async function runStatus(config, opts, io) {
  const sidecar = new Sidecar({
    binary: config.binary,
    home: config.home,
    callTimeoutMs: config.callTimeoutMs,
    client: { name: "openclaw-ctxhost-status", version: io.version },
    warn: () => {},
    // The server's own log lines (e.g. the quarantine warning) would repeat the report.
    stderr: () => {},
  });
  let report;
  try {
    // A fresh sidecar knows no session yet (`health` answers from memory): per-session history
    // is `ctxhost context history --session <key>`.
    report = await checkHealth({ sidecar });
  } finally {
    await sidecar.shutdown(1000).catch(() => {});
  }
  const view = { binary: config.binary, home: config.home, ...report };
  io.out(opts.json ? JSON.stringify(view, null, 2) : [...formatReport(report), `  binary: ${config.binary}`, `  CTXHOST_HOME: ${config.home}`].join("\n"));
  return report.ok ? 0 : 1;
}

/**
 * Adds `ctxhost status` to OpenClaw's commander program.
 * @param {any} program the root `openclaw` command (commander)
 * @param {() => import("../client/config.js").BridgeConfig} configFor
 * @param {string | undefined} version
 */
export function addStatusCommand(program, configFor, version) {
  const root = program.command(CLI_DESCRIPTOR.name).description(CLI_DESCRIPTOR.description);
  root
    .command("status")
    .description("Ask ctxhost serve for its health; exits 1 unless it is ok")
    .option("--json", "print the report as JSON")
    .action(async (/** @type {{ json?: boolean }} */ opts) => {
      const code = await runStatus(configFor(), opts, { out: (s) => process.stdout.write(`${s}\n`), version });
      if (code !== 0) process.exitCode = code;
    });
  return root;
}
