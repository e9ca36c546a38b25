// Times the pi coding agent's (npm `@mariozechner/pi-coding-agent`) session loading and
// compaction preparation on transcript files, for the side-by-side rows of BENCHMARKS.md.
//
//   node harness.mjs [--budget-ms N] LABEL=PATH [LABEL=PATH ...]
//
// Prints one JSON object on stdout: per label, the median milliseconds of each step. Not a
// dependency of ctxhost: `bench-table` runs it when node and npm are available.
//
// The steps, as pi runs them when it opens a session and prepares a compaction:
// - load: readFileSync + parse every line (`parseSessionEntries`, what `loadEntriesFromFile`
//   does) + `migrateSessionEntries` (v1/v2 to v3, in place) + the id index and the active
//   branch from the leaf (`SessionManager`'s `_buildIndex` + `getBranch`);
// - estimate: `estimateContextTokens(buildSessionContext(branch).messages)`;
// - cut: `findCutPoint(branch, boundaryStart, branch.length, keepRecentTokens)`;
// - prepare: `prepareCompaction(branch, settings)` (estimate + cut + gathering the messages to
//   summarize and the file operations; no model call);
// - total: load + prepare in one clock;
// - sessionManagerOpen: `SessionManager.open(copy)` on a copy already migrated to v3 (pi reads
//   the file twice there; on a v1/v2 file it would also rewrite it, so a copy is used);
// - openPrepare: `prepareCompaction(SessionManager.open(copy).getBranch(), settings)`, the way
//   pi's agent session opens a session and prepares its compaction.
//
// A file pi cannot open (node refuses strings over ~512 MiB, so `readFileSync(path, "utf8")`
// fails on a 1 GB transcript) gets `{ error }` with node's message instead of timings.

import { copyFileSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";

import { SessionManager } from "@mariozechner/pi-coding-agent";
// Not re-exported by the package's entry point: imported from its dist files directly.
import {
	DEFAULT_COMPACTION_SETTINGS,
	estimateContextTokens,
	findCutPoint,
	prepareCompaction,
} from "./node_modules/@mariozechner/pi-coding-agent/dist/core/compaction/compaction.js";
import {
	buildSessionContext,
	migrateSessionEntries,
	parseSessionEntries,
} from "./node_modules/@mariozechner/pi-coding-agent/dist/core/session-manager.js";

const require = createRequire(import.meta.url);
const piVersion = require("./node_modules/@mariozechner/pi-coding-agent/package.json").version;

const args = process.argv.slice(2);
let budgetMs = 3000;
const files = [];
for (let i = 0; i < args.length; i++) {
	if (args[i] === "--budget-ms") budgetMs = Number(args[++i]);
	else {
		const eq = args[i].indexOf("=");
		if (eq < 0) throw new Error(`expected LABEL=PATH, got ${args[i]}`);
		files.push([args[i].slice(0, eq), args[i].slice(eq + 1)]);
	}
}

const settings = { ...DEFAULT_COMPACTION_SETTINGS, keepRecentTokens: 20000 };

/** Median milliseconds of `fn` over a time budget (after warm-up, so the JIT has run). */
function time(fn) {
	for (let i = 0; i < 3; i++) fn();
	const samples = [];
	const started = process.hrtime.bigint();
	while (samples.length < 5 || (samples.length < 2000 && Number(process.hrtime.bigint() - started) / 1e6 < budgetMs)) {
		const t = process.hrtime.bigint();
		fn();
		samples.push(Number(process.hrtime.bigint() - t) / 1e6);
	}
	samples.sort((a, b) => a - b);
	return { medianMs: samples[Math.floor(samples.length / 2)], samples: samples.length };
}

/** load: what SessionManager does to a file in memory, once. */
function load(path) {
	const entries = parseSessionEntries(readFileSync(path, "utf8"));
	migrateSessionEntries(entries);
	const byId = new Map();
	let leaf = null;
	for (const e of entries) {
		if (e.type === "session") continue;
		byId.set(e.id, e);
		leaf = e;
	}
	const branch = [];
	let cur = leaf;
	while (cur) {
		branch.unshift(cur);
		cur = cur.parentId ? byId.get(cur.parentId) : undefined;
	}
	return { entries, byId, branch };
}

function boundaryStart(branch) {
	for (let i = branch.length - 1; i >= 0; i--) {
		if (branch[i].type === "compaction") {
			const k = branch.findIndex((e) => e.id === branch[i].firstKeptEntryId);
			return k >= 0 ? k : i + 1;
		}
	}
	return 0;
}

const out = { pi: piVersion, node: process.version, budgetMs, settings, files: {} };
const scratch = mkdtempSync(join(tmpdir(), "ctxhost-peer-"));
try {
	for (const [label, path] of files) {
		try {
			out.files[label] = measure(label, path);
		} catch (e) {
			out.files[label] = { path, bytes: statSync(path).size, error: String(e?.message ?? e) };
		}
	}
} finally {
	rmSync(scratch, { recursive: true, force: true });
}
process.stdout.write(`${JSON.stringify(out)}\n`);

function measure(label, path) {
	const { branch } = load(path);
	const context = buildSessionContext(branch);
	const estimate = estimateContextTokens(context.messages);
	const start = boundaryStart(branch);
	const cut = findCutPoint(branch, start, branch.length, settings.keepRecentTokens);
	const prepared = prepareCompaction(branch, settings);
	const copy = join(scratch, `${label}.jsonl`);
	copyFileSync(path, copy);
	SessionManager.open(copy); // migrates the copy to v3 once
	return {
		path,
		bytes: statSync(path).size,
		branchEntries: branch.length,
		contextMessages: context.messages.length,
		contextTokens: estimate.tokens,
		firstKeptEntryId: prepared?.firstKeptEntryId ?? null,
		firstKeptEntryIndex: cut.firstKeptEntryIndex,
		messagesToSummarize: prepared?.messagesToSummarize.length ?? 0,
		load: time(() => load(path)),
		estimate: time(() => estimateContextTokens(buildSessionContext(branch).messages)),
		cut: time(() => findCutPoint(branch, start, branch.length, settings.keepRecentTokens)),
		prepare: time(() => prepareCompaction(branch, settings)),
		total: time(() => prepareCompaction(load(path).branch, settings)),
		sessionManagerOpen: time(() => SessionManager.open(copy).getBranch()),
		openPrepare: time(() => prepareCompaction(SessionManager.open(copy).getBranch(), settings)),
	};
}
