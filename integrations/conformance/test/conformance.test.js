// One engine, every agent: the recorded conversation (conversation.json) replayed through the
// OpenClaw plugin, the pi extension and the Hermes plugin, each over its own `ctxhost serve` and
// its own CTXHOST_HOME, must give the model the same context at every call (the same fixture
// messages kept, the same summary text) and the same ctx_search answers, for each bundled engine.
//
//   node --test integrations/conformance/test/*.test.js     (or integrations/conformance/run)
//
// CTXHOST_BIN names the binary (default: the workspace's debug build). Hermes' driver runs in
// $CONFORMANCE_PYTHON, else the venv .ci/e2e-hermes installs, else python3, whichever has
// hermes-agent; without one the Hermes comparisons are skipped, saying so.

import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { binaryFor, freshHome, skipWithout } from "../../client/test-support/common.js";
import { build } from "../fixture.mjs";
import { callPoints, firstDifference, load, neutral } from "../neutral.mjs";

const HERE = resolve(fileURLToPath(import.meta.url), "../..");
const REPO = resolve(HERE, "../..");
const FIXTURE = join(HERE, "conversation.json");
const BINARY = binaryFor(HERE);
const ENGINES = ["legacy", "lossless", "checkpoint-manager"];
const run = promisify(execFile);

/**
 * ctxhost's config for the run: a small window, so the manual compactions of the fixture have
 * something to do. Automatic compaction is off: when to compact is each agent's own policy
 * (OpenClaw's engine compacts inside assemble, pi past its window less its reserve, Hermes at 75%
 * of its estimate, and Hermes has no hook before a model call at all), so the fixture says when,
 * as a person's /compact would, and what is compared is what each bridge makes of the same engine
 * at the same points.
 * @param {string} engine
 */
function config(engine) {
  return {
    plugins: { slots: { contextEngine: engine } },
    agents: {
      defaults: {
        contextWindow: 3000,
        compaction: { autoEnabled: false, reserveTokens: 300, reserveTokensFloor: 0, summarizeKeepRecentTokens: 600, fullKeepRecentTokens: 500 },
      },
    },
  };
}

/** A Python that has hermes-agent, or why there is none. */
function hermesPython() {
  const candidates = [process.env.CONFORMANCE_PYTHON, join(REPO, "target/e2e-cache/hermes-0.19.0/venv/bin/python"), "python3"];
  for (const python of candidates) {
    if (!python || (python.includes("/") && !existsSync(python))) continue;
    try {
      execFileSync(python, ["-c", "import agent.context_engine"], { stdio: "ignore" });
      return { python };
    } catch {
      // not this one
    }
  }
  const why = "no Python with hermes-agent (set CONFORMANCE_PYTHON, or run .ci/e2e-hermes once to install its venv)";
  process.stderr.write(`\n*** SKIPPING the Hermes comparisons: ${why} ***\n\n`);
  return { why };
}

/**
 * Runs one agent's driver against a fresh home; its raw record.
 * @param {string} command
 * @param {string} driver
 * @param {string} engine
 * @param {string[]} homes where the home is listed, for removal
 */
async function replay(command, driver, engine, homes) {
  const home = freshHome(`ctxhost-conformance-${engine}-`, config(engine));
  homes.push(home);
  const out = join(home, "record.json");
  let stderr;
  try {
    ({ stderr } = await run(command, [join(HERE, "drivers", driver), "--fixture", FIXTURE, "--home", home, "--binary", BINARY, "--out", out], {
      timeout: 60_000,
      maxBuffer: 16 << 20,
    }));
  } catch (err) {
    const e = /** @type {any} */ (err);
    throw new Error(`the ${driver} driver failed (${engine}): ${e.message}\n${e.stderr ?? ""}`);
  }
  return { ...JSON.parse(readFileSync(out, "utf8")), stderr };
}

/**
 * Fails naming the first difference between two agents, with what their bridges said.
 * @param {Record<string, any>} records
 * @param {string} a
 * @param {string} b
 */
function assertSame(records, a, b) {
  const difference = firstDifference(a, records[a], b, records[b]);
  const said = (/** @type {string} */ agent) => `--- ${agent}'s bridge said:\n${records[agent].stderr || "(nothing)"}`;
  assert.equal(difference, null, `${difference}\n${said(a)}\n${said(b)}`);
}

const fixture = load(FIXTURE);
const skip = skipWithout(BINARY);
const hermes = skip ? { why: skip } : hermesPython();

describe("one conversation through OpenClaw, pi and Hermes", { skip, concurrency: 1 }, () => {
  for (const engine of ENGINES) {
    describe(engine, () => {
      /** @type {string[]} */
      const homes = [];
      /** @type {Promise<Record<string, ReturnType<typeof neutral> & { stderr: string }>>} */
      let records;
      const all = () =>
        (records ??= (async () => {
          const raw = await Promise.all([
            replay(process.execPath, "openclaw.mjs", engine, homes),
            replay(process.execPath, "pi.mjs", engine, homes),
            ...(hermes.python ? [replay(hermes.python, "hermes.py", engine, homes)] : []),
          ]);
          return Object.fromEntries(raw.map((r) => [r.agent, { ...neutral(r, fixture), stderr: r.stderr }]));
        })());

      test.after(() => {
        for (const home of homes) rmSync(home, { recursive: true, force: true });
      });

      test("the engine compacts, and a compacted message is found again", async () => {
        const { openclaw } = await all();
        const inserted = openclaw.calls.filter((c) => c.context.some((x) => typeof x === "object" && "inserted" in x));
        assert.ok(inserted.length > 0, "some model call gets an inserted summary");
        const last = openclaw.calls.at(-1);
        assert.ok(!last?.context.includes("m0"), "the first message is out of the last call's context");
        assert.ok(openclaw.recall.some((r) => / · compacted/.test(r.answer)), "a ctx_search hit is marked compacted");
      });

      test("pi gives the model what OpenClaw gives it, call by call, and answers the same", async () => {
        assertSame(await all(), "openclaw", "pi");
      });

      test("Hermes gives the model what OpenClaw gives it, call by call, and answers the same", { skip: hermes.why }, async () => {
        assertSame(await all(), "openclaw", "hermes");
      });
    });
  }
});

describe("the fixture", () => {
  test("conversation.json is what fixture.mjs generates", () => {
    assert.deepEqual(JSON.parse(readFileSync(FIXTURE, "utf8")), build(), "regenerate it: node integrations/conformance/fixture.mjs > integrations/conformance/conversation.json");
  });
  test("it has tool rounds, compactions and queries", () => {
    assert.ok(fixture.turns.some((/** @type {any} */ t) => callPoints(t).length > 1), "a turn with a tool round");
    assert.ok(fixture.turns.filter((/** @type {any} */ t) => t.compactBefore).length >= 2, "compactions");
    assert.ok(fixture.queries.length > 0);
  });
});

describe("the comparer", () => {
  const base = { calls: [{ turn: 0, call: 0, context: ["m0"] }, { turn: 1, call: 0, context: ["m0", "m1", "m2"] }], recall: [{ query: "q", answer: "a" }] };
  test("equal records have no difference", () => {
    assert.equal(firstDifference("a", base, "b", structuredClone(base)), null);
  });
  test("names the first turn, call and context item that differ", () => {
    const other = structuredClone(base);
    other.calls[1].context[1] = { inserted: "compactionSummary", text: "s" };
    const said = firstDifference("a", base, "b", other);
    assert.match(String(said), /^turn 1, model call 0, context\[1\] \(of 3 \/ 3\): a has "m1", b has \{"inserted"/);
  });
  test("names a missing call and a different search answer", () => {
    assert.match(String(firstDifference("a", base, "b", { ...base, calls: base.calls.slice(0, 1) })), /^model call 1: a has turn 1 call 0, b has none/);
    assert.match(String(firstDifference("a", base, "b", { ...base, recall: [{ query: "q", answer: "z" }] })), /^ctx_search "q": a answered "a", b answered "z"/);
  });
});
