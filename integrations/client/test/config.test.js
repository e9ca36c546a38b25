// Where the integrations find the ctxhost binary: the configured one, else the installed
// platform package's (esbuild's layout), else `ctxhost` on PATH with a hint that says what to
// do when it is not there either.
//
//   node --test integrations/client/test/*.test.js

import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import { pathToFileURL } from "node:url";
import { missingBinaryHint, packagedBinary, platformPackage, resolveConfig } from "../config.js";
import { Sidecar } from "../sidecar.js";

test("a configured binary wins over the platform package's, which wins over PATH", () => {
  const packaged = () => "/pkg/node_modules/@ctxhost/cli-linux-x64/bin/ctxhost";
  const configured = resolveConfig({ binary: "/opt/ctxhost" }, {}, packaged);
  assert.equal(configured.binary, "/opt/ctxhost");
  assert.equal(configured.binaryHint, undefined);
  const fromPackage = resolveConfig({}, {}, packaged);
  assert.equal(fromPackage.binary, packaged());
  assert.equal(fromPackage.binaryHint, undefined);
  const onPath = resolveConfig({}, {}, () => undefined);
  assert.equal(onPath.binary, "ctxhost", "a bare name is left to PATH");
  assert.match(onPath.binaryHint ?? "", /put it on PATH, or set the binary setting/);
});

test("the hint names the missing package on a published platform, and says none exists elsewhere", () => {
  assert.equal(platformPackage("linux", "x64"), "@ctxhost/cli-linux-x64");
  assert.match(missingBinaryHint("linux", "x64"), /@ctxhost\/cli-linux-x64 \(an optional dependency\) is not installed/);
  assert.match(missingBinaryHint("darwin", "arm64"), /no prebuilt ctxhost is published for darwin-arm64 \(only linux-x64\)/);
});

test("packagedBinary resolves the platform package from the integration's own folder, as Node resolves an import", (t) => {
  const root = mkdtempSync(join(tmpdir(), "ctxhost-config-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const from = pathToFileURL(join(root, "integration", "client", "config.js"));
  assert.equal(packagedBinary(from, "linux", "x64"), undefined, "not installed");
  const pkg = join(root, "node_modules", "@ctxhost", "cli-linux-x64");
  mkdirSync(join(pkg, "bin"), { recursive: true });
  writeFileSync(join(pkg, "package.json"), JSON.stringify({ name: "@ctxhost/cli-linux-x64", version: "0.0.0" }));
  assert.equal(packagedBinary(from, "linux", "x64"), undefined, "a package without its binary is not used");
  writeFileSync(join(pkg, "bin", "ctxhost"), "#!/bin/sh\n");
  chmodSync(join(pkg, "bin", "ctxhost"), 0o755);
  assert.equal(packagedBinary(from, "linux", "x64"), join(pkg, "bin", "ctxhost"));
  assert.equal(packagedBinary(from, "darwin", "arm64"), undefined, "another platform's package");
});

test("a binary that does not exist fails the call with the hint", async () => {
  const sidecar = new Sidecar({
    binary: "/nonexistent/ctxhost",
    binaryHint: "HINT: install the platform package",
    callTimeoutMs: 5000,
    warn: () => {},
    stderr: () => {},
  });
  await assert.rejects(sidecar.call("health"), (err) => {
    assert.match(String(err.message), /could not run `?\/nonexistent\/ctxhost`?: .*ENOENT.*\(HINT: install the platform package\)/);
    return true;
  });
  sidecar.close?.();
});
