// A read-only npm registry on 127.0.0.1 that serves exactly the `.tgz` files of one folder (the
// release's target/dist/), so the end-to-end runs install ctxhost's packages the way users will
// once they are published: `openclaw plugins install <.tgz>` and `pi install npm:<name>` resolve
// the platform package (an optional dependency) here, through `@ctxhost:registry` in the fresh
// home's .npmrc. Every other name answers 404: nothing else is served from here.
//
//   node local-registry.mjs --dir target/dist --port-file FILE [--log FILE]

import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { appendFileSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { basename, join } from "node:path";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: { dir: { type: "string" }, "port-file": { type: "string" }, log: { type: "string" } },
});
if (!args.dir || !args["port-file"]) {
  console.error("usage: local-registry.mjs --dir DIR --port-file FILE [--log FILE]");
  process.exit(2);
}

/**
 * Every package of the folder: name → { manifest, file, bytes }.
 * @param {string} dir
 */
function readPackages(dir) {
  /** @type {Map<string, { manifest: any, file: string, bytes: Buffer }>} */
  const packages = new Map();
  for (const entry of readdirSync(dir).filter((f) => f.endsWith(".tgz"))) {
    const file = join(dir, entry);
    const manifest = JSON.parse(execFileSync("tar", ["-xzOf", file, "package/package.json"], { encoding: "utf8" }));
    packages.set(manifest.name, { manifest, file, bytes: readFileSync(file) });
  }
  return packages;
}

/**
 * The registry's document for one package (one version, tagged latest).
 * @param {{ manifest: any, file: string, bytes: Buffer }} pkg
 * @param {string} origin
 */
function packument(pkg, origin) {
  const { manifest, file, bytes } = pkg;
  const version = {
    ...manifest,
    _id: `${manifest.name}@${manifest.version}`,
    dist: {
      tarball: `${origin}/-/${basename(file)}`,
      shasum: createHash("sha1").update(bytes).digest("hex"),
      integrity: `sha512-${createHash("sha512").update(bytes).digest("base64")}`,
    },
  };
  return { name: manifest.name, "dist-tags": { latest: manifest.version }, versions: { [manifest.version]: version } };
}

const packages = readPackages(args.dir);
const server = createServer((req, res) => {
  const path = decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname);
  if (args.log) appendFileSync(args.log, `${req.method} ${path}\n`);
  const origin = `http://${req.headers.host}`;
  const tarball = path.startsWith("/-/") ? [...packages.values()].find((p) => basename(p.file) === path.slice(3)) : undefined;
  if (tarball) {
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": tarball.bytes.length });
    res.end(tarball.bytes);
    return;
  }
  const pkg = packages.get(path.slice(1));
  if (!pkg) {
    res.writeHead(404, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: `not found: ${path.slice(1)} is not among ${[...packages.keys()].join(", ")}` }));
    return;
  }
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify(packument(pkg, origin)));
});
server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  if (!address || typeof address === "string") throw new Error("no port");
  writeFileSync(args["port-file"], String(address.port));
  console.error(`local registry on 127.0.0.1:${address.port}: ${[...packages.keys()].join(", ")}`);
});
