// Bridge timing, for measuring what ctxhost adds to an OpenClaw or pi turn. With
// CTXHOST_BRIDGE_TIMING=1 every sidecar call and every engine hook is logged to stderr as one
// `[ctxhost-bridge] …` line, and a summary line is written when the process exits:
//   [ctxhost-bridge] summary hooks=7 hookMs=12.4 calls=9 callMs=9.8 spawns=1 spawnMs=31.2 bytesOut=… bytesIn=…
// Hook time includes the calls it makes plus the client's own work (fingerprints, building the
// message array, budget trimming); it is the figure to put beside a turn's wall time.

import { writeSync } from "node:fs";

const totals = {
  hooks: 0,
  hookMs: 0,
  calls: 0,
  callMs: 0,
  spawns: 0,
  spawnMs: 0,
  bytesOut: 0,
  bytesIn: 0,
};
let summaryInstalled = false;

/** @param {NodeJS.ProcessEnv} [env] */
export function timingEnabled(env = process.env) {
  const value = env.CTXHOST_BRIDGE_TIMING;
  return value !== undefined && value !== "" && value !== "0" && value !== "false";
}

/** @param {string} line */
function emit(line) {
  try {
    writeSync(2, `[ctxhost-bridge] ${line}\n`);
  } catch {
    // stderr closed: nothing to report to
  }
}

function installSummary() {
  if (summaryInstalled) return;
  summaryInstalled = true;
  process.once("exit", () => {
    const f = (/** @type {number} */ n) => n.toFixed(2);
    emit(
      `summary hooks=${totals.hooks} hookMs=${f(totals.hookMs)} calls=${totals.calls} callMs=${f(totals.callMs)} spawns=${totals.spawns} spawnMs=${f(totals.spawnMs)} bytesOut=${totals.bytesOut} bytesIn=${totals.bytesIn}`,
    );
  });
}

/**
 * The hooks for `Sidecar` and the engine, or no-ops when timing is off.
 * @param {boolean} enabled
 */
export function createTiming(enabled) {
  if (!enabled) {
    return {
      enabled: false,
      onCall: undefined,
      onSpawn: undefined,
      /** @type {(hook: string, ms: number, detail?: string) => void} */
      hook: () => {},
    };
  }
  installSummary();
  return {
    enabled: true,
    /** @param {import("./sidecar.js").CallTiming} t */
    onCall: (t) => {
      totals.calls += 1;
      totals.callMs += t.ms;
      totals.bytesOut += t.bytesOut;
      totals.bytesIn += t.bytesIn;
      emit(`call ${t.method} ${t.ms.toFixed(2)} ms out=${t.bytesOut}B in=${t.bytesIn}B${t.ok ? "" : " FAILED"}`);
    },
    /** @param {number} ms @param {number | undefined} pid */
    onSpawn: (ms, pid) => {
      totals.spawns += 1;
      totals.spawnMs += ms;
      emit(`spawn pid=${pid} ${ms.toFixed(2)} ms (spawn + initialize)`);
    },
    /** @param {string} hook @param {number} ms @param {string} [detail] */
    hook: (hook, ms, detail) => {
      totals.hooks += 1;
      totals.hookMs += ms;
      emit(`hook ${hook} ${ms.toFixed(2)} ms${detail ? ` ${detail}` : ""}`);
    },
  };
}
