"""Checks of one end-to-end run with the real Hermes (.ci/e2e-hermes), from what the fake model
recorded and what ctxhost's mirror holds: Hermes exits 0 whatever happened, so its exit code
says nothing.

  python check.py --requests F --mirror F --turns N --label hermes
"""

import argparse
import json
import re
import sys

SUMMARY_LEAD = "The earlier part of this conversation was compacted."


def text_of(message):
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", required=True)
    ap.add_argument("--mirror", required=True)
    ap.add_argument("--turns", type=int, required=True)
    ap.add_argument("--label", default="hermes")
    a = ap.parse_args()
    failures = []

    def check(ok, what):
        print(f"  {'ok ' if ok else 'FAIL'} {what}")
        if not ok:
            failures.append(what)

    requests = [json.loads(line)["body"] for line in open(a.requests, encoding="utf-8") if line.strip()]
    turn = lambda k: f"E2E-{a.label}-TURN-{k}:"
    check(len(requests) >= a.turns + 3, f"the fake model got {len(requests)} requests ({a.turns} turns and a recall of 3)")
    offered = [{(t.get("function") or {}).get("name") for t in r.get("tools") or []} for r in requests]
    check(all({"ctx_search", "ctx_expand"} <= names for names in offered), "every request offered ctx_search and ctx_expand")

    # After ctxhost compacted, the model saw ctxhost's summary in place of the first turns.
    compacted = [r for r in requests if any(m.get("role") != "system" and text_of(m).startswith(SUMMARY_LEAD) for m in r["messages"])]
    check(bool(compacted), "a request carried ctxhost's compaction summary")
    if compacted:
        first = compacted[0]["messages"]
        check(not any(text_of(m).startswith(turn(1)) for m in first), "that request no longer held turn 1's prompt")
        roles = [m.get("role") for m in first if m.get("role") != "system"]
        check(all(not (x == y == "user") for x, y in zip(roles, roles[1:])), f"no two user messages in a row ({roles})")

    # The recall: ctx_search, then ctx_expand on a compacted hit, then an answer.
    probe = [r for r in requests if any("RECALL-PROBE" in text_of(m) for m in r["messages"] if m.get("role") == "user")]
    # The last request of the probe holds its whole exchange (each request repeats the earlier ones).
    calls = [c["function"] for m in (probe[-1]["messages"] if probe else []) if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    names = [c["name"] for c in calls]
    check(names[:2] == ["ctx_search", "ctx_expand"], f"the recall called ctx_search then ctx_expand ({names})")
    results = [text_of(m) for m in (probe[-1]["messages"] if probe else []) if m.get("role") == "tool"]
    check(len(results) >= 2 and bool(re.search(r"^- \S+ · user · .* · compacted", results[0], re.M)),
          "ctx_search found the compacted prompt" + (f": {results[0][:300]!r}" if results else ""))
    check(len(results) >= 2 and f"END-OF-E2E-{a.label}-TURN-1" in results[1],
          "ctx_expand gave back the compacted prompt's text")

    # The mirror: every turn once, a compaction entry.
    entries = [json.loads(line) for line in open(a.mirror, encoding="utf-8") if line.strip()]
    users = [text_of(e["message"]) for e in entries if e.get("type") == "message" and e["message"].get("role") == "user"]
    for k in range(1, a.turns + 1):
        n = sum(1 for u in users if u.startswith(turn(k)))
        check(n == 1, f"the mirror holds turn {k}'s prompt once ({n})")
    check(not any(u.startswith(SUMMARY_LEAD) for u in users), "the mirror holds no summary as a user message")
    check(any(e.get("type") == "compaction" for e in entries), "the mirror records ctxhost's compaction")
    check(any(e.get("type") == "message" and e["message"].get("role") == "toolResult" and e["message"].get("toolName") == "ctx_expand" for e in entries),
          "the mirror holds the recall's tool results")
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
