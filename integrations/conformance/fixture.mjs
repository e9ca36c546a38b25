#!/usr/bin/env node
// Writes the recorded conversation the conformance run replays (conversation.json beside this
// file): a debugging session of 12 turns in a neutral form, generated here so that it is ours to
// change. Each turn is a user prompt, an assistant reply (some with a tool call and its result)
// and, before some turns, a manual compaction (what a person's /compact does in each agent).
//
//   node integrations/conformance/fixture.mjs > integrations/conformance/conversation.json
//
// Every message's text is distinct: the drivers name a kept message by its content, and a
// repeated text would make two messages one (load() refuses such a fixture). Deterministic: the
// same file every run.

import { fileURLToPath } from "node:url";

/** A fixed start (2026-11-20T09:00:00Z) and one minute between messages. */
const START_MS = Date.parse("2026-11-20T09:00:00Z");

/**
 * What each turn is about: the request, the tool the assistant reaches for (if any), what the
 * tool answers, and the reply. The rare words (ENOSPC, quota-reaper, tangerine-otter, …) are what
 * the recall queries look for once their turns are compacted away.
 */
const TOPICS = [
  {
    ask: "The nightly import job fails with `ENOSPC: no space left on device` while writing /var/spool/ingest/batch-0412.parquet. The volume has a 40 GiB quota. Find out what fills it.",
    tool: ["run_shell", { command: "du -sh /var/spool/ingest/* | sort -h | tail -5" }],
    result: "31G /var/spool/ingest/retry-queue\n4.2G /var/spool/ingest/batch-0411.parquet\n2.9G /var/spool/ingest/batch-0410.parquet",
    reply: "The retry queue holds 31 GiB of failed batches that are never cleaned up; that is what exhausts the quota.",
  },
  {
    ask: "Why does the retry queue keep failed batches forever? I thought the quota-reaper cron job removes anything older than seven days.",
    tool: ["read_file", { path: "ops/cron/quota-reaper.sh" }],
    result: "#!/bin/sh\n# quota-reaper: prune old spool files\nfind /var/spool/ingest -maxdepth 1 -name '*.parquet' -mtime +7 -delete",
    reply: "The quota-reaper only looks one level deep (-maxdepth 1), so everything under retry-queue/ is never pruned.",
  },
  {
    ask: "Change the reaper so it also prunes retry-queue, but keep anything newer than 48 hours there. Never delete files under /var/spool/ingest/pinned: those are legal holds.",
    tool: ["edit_file", { path: "ops/cron/quota-reaper.sh", change: "prune retry-queue after 48 hours, skip pinned/" }],
    result: "Edited ops/cron/quota-reaper.sh: 3 lines added, 1 removed.",
    reply: "Done: retry-queue files older than 48 hours are pruned and pinned/ is excluded explicitly.",
  },
  {
    ask: "Run the reaper's shellcheck and its bats tests before we ship it.",
    tool: ["run_shell", { command: "shellcheck ops/cron/quota-reaper.sh && bats ops/cron/test/reaper.bats" }],
    result: "ok 1 prunes parquet older than 7 days\nok 2 prunes retry-queue older than 48 hours\nnot ok 3 keeps pinned legal holds\n# expected pinned/hold-77.parquet to survive",
    reply: "Test 3 fails: the exclusion of pinned/ comes after -delete in the find expression, so it never applies.",
  },
  {
    ask: "Fix the ordering so pinned files survive, and tell me the exact find expression you end up with.",
    tool: ["edit_file", { path: "ops/cron/quota-reaper.sh", change: "move -path pinned -prune before -delete" }],
    result: "Edited ops/cron/quota-reaper.sh: 1 line changed.",
    reply: "The expression is now: find /var/spool/ingest -path '*/pinned' -prune -o -name '*.parquet' -mtime +2 -delete.",
  },
  {
    ask: "Separate question: the import's checksum step logs `digest mismatch for shard 17` about once a week. Is that related to the disk filling up?",
    reply: "Probably yes: a write cut short by ENOSPC leaves a truncated shard whose digest cannot match. It should stop once the quota holds.",
  },
  {
    ask: "Let us make sure. Show me the last three digest mismatch lines from the import log with their timestamps.",
    tool: ["run_shell", { command: "grep 'digest mismatch' /var/log/ingest/import.log | tail -3" }],
    result: "2026-11-02T03:14:07Z digest mismatch for shard 17 (disk full)\n2026-11-09T03:12:55Z digest mismatch for shard 17 (disk full)\n2026-11-16T03:15:40Z digest mismatch for shard 4 (disk full)",
    reply: "All three mismatches happened while the disk was full, so the reaper fix should end them.",
  },
  {
    ask: "Good. For the release notes: the staging deploy key is called tangerine-otter, mention that it must be rotated after this change ships.",
    reply: "Noted: the release notes will ask to rotate the staging deploy key tangerine-otter once the change ships.",
  },
  {
    ask: "Draft the release note now, three sentences at most, plain text.",
    reply: "Release note: the quota-reaper now prunes the ingest retry queue after 48 hours while keeping pinned legal holds. This ends the nightly ENOSPC failures and the digest mismatches they caused. After deploying, rotate the staging deploy key.",
  },
  {
    ask: "Check whether any other cron job writes into /var/spool/ingest, so we do not fill it from another side.",
    tool: ["run_shell", { command: "grep -rl '/var/spool/ingest' ops/cron" }],
    result: "ops/cron/quota-reaper.sh\nops/cron/replay-failed.sh",
    reply: "replay-failed.sh also writes there: it re-queues failed batches into retry-queue every hour.",
  },
  {
    ask: "Does replay-failed.sh give up after some attempts, or does it re-queue the same batch forever?",
    tool: ["read_file", { path: "ops/cron/replay-failed.sh" }],
    result: "#!/bin/sh\nfor f in /var/spool/ingest/retry-queue/*.parquet; do\n  ingest-cli replay \"$f\" || cp \"$f\" /var/spool/ingest/retry-queue/\ndone",
    reply: "It retries forever and copies the batch back on every failure, so one poisoned batch grows the queue hourly.",
  },
  {
    ask: "Summarize where we are: what is fixed, what is still open, and what I must not forget before the release.",
    reply: "Fixed: the reaper prunes retry-queue after 48 hours and keeps pinned holds. Open: replay-failed.sh retries without limit. Before the release: rotate the staging deploy key and update the release note.",
  },
];

/** Turns before which a person compacts by hand (the agents' /compact). */
const COMPACT_BEFORE = new Set([3, 6, 9]);

/** What ctx_search is asked once the conversation is over: words of compacted turns, and of the last. */
const QUERIES = ["ENOSPC", "quota-reaper pinned", "tangerine-otter", "replay-failed"];

/** Words that pad a prompt into a realistic length: the same text each run (a fixed LCG). */
const WORDS = "the a job log disk batch queue file cron shard ingest volume night retry step host path check write read size limit run".split(" ");

/** @param {number} seed @param {number} count */
function filler(seed, count) {
  let state = seed;
  const out = [];
  for (let i = 0; i < count; i++) {
    state = (state * 1103515245 + 12345) % 2147483648;
    out.push(WORDS[state % WORDS.length]);
  }
  return out.join(" ");
}

/** The conversation in its neutral form. */
export function build() {
  let clock = START_MS;
  const at = () => new Date((clock += 60_000)).toISOString();
  const turns = TOPICS.map((topic, t) => {
    /** @type {any[]} */
    const messages = [
      { role: "user", text: `${topic.ask}\n\nContext from my notes (turn ${t}): ${filler(t + 1, 90)}.`, at: at() },
    ];
    if (topic.tool) {
      const id = `call_${String(t).padStart(2, "0")}`;
      const [name, args] = topic.tool;
      messages.push({ role: "assistant", text: `I will use ${name} for turn ${t}.`, toolCalls: [{ id, name, arguments: args }], at: at() });
      messages.push({ role: "toolResult", toolCallId: id, toolName: name, text: `${topic.result}\n(${filler(t + 101, 60)})`, isError: false, at: at() });
    }
    messages.push({ role: "assistant", text: topic.reply, at: at() });
    return { compactBefore: COMPACT_BEFORE.has(t), messages };
  });
  return {
    about:
      "A recorded conversation for integrations/conformance: replayed through OpenClaw, pi and Hermes on one engine. Generated by fixture.mjs; do not edit by hand.",
    turns,
    queries: QUERIES,
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.stdout.write(`${JSON.stringify(build(), null, 2)}\n`);
}
