// The shared client against a protocol stand-in (test-support/fake-serve.mjs): a server of
// another protocol version is refused at `initialize`, with a message saying what to do.
//
//   node --test integrations/client/test/*.test.js

import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import test from "node:test";
import { fileURLToPath } from "node:url";
import { PROTOCOL_VERSION, Sidecar, isSidecarError } from "../sidecar.js";

const FAKE = join(dirname(fileURLToPath(import.meta.url)), "..", "test-support", "fake-serve.mjs");

/** @param {Record<string, string>} env */
function sidecar(env) {
  /** @type {string[]} */
  const warnings = [];
  const s = new Sidecar({
    binary: process.execPath,
    args: [FAKE],
    env: { ...process.env, ...env },
    callTimeoutMs: 5000,
    warn: (m) => warnings.push(m),
    stderr: () => {},
  });
  return { s, warnings };
}

test("a server of another protocol version is refused: the call fails naming both versions, the child is gone", async (t) => {
  const { s } = sidecar({ FAKE_SERVE_PROTOCOL: "2" });
  t.after(() => s.shutdown(500));
  await assert.rejects(s.call("session.bootstrap", { sessionKey: "k" }), (err) => {
    assert.ok(isSidecarError(err, "spawn"), String(err));
    assert.match(
      /** @type {Error} */ (err).message,
      /ctxhost serve \(.*\) speaks protocol version 2, this client speaks 1: use a ctxhost binary and an integration of the same release/,
    );
    return true;
  });
  assert.equal(s.running, false);
  assert.equal(s.initialized, null);
});

test("the same server at protocol 1 answers", async (t) => {
  const { s } = sidecar({});
  t.after(() => s.shutdown(500));
  const r = await s.call("session.bootstrap", { sessionKey: "k" });
  assert.equal(r.sessionKey, "k");
  assert.equal(s.initialized.protocolVersion, PROTOCOL_VERSION);
});
