"""A stand-in for `ctxhost serve` that fails on purpose (for the fallback tests): it answers
`initialize`, then, by its first argument, `exit` dies at the next request and `hang` never
answers it."""

import json
import sys
import time

mode = sys.argv[1] if len(sys.argv) > 1 else "exit"
for line in sys.stdin:
    request = json.loads(line)
    if request["method"] == "initialize":
        answer = {"protocolVersion": 1, "host": {"name": "fake", "version": "0"}, "engine": {"id": "fake"},
                  "contextWindow": 3000, "limits": {"maxLineBytes": 16777216}}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": answer}) + "\n")
        sys.stdout.flush()
    elif mode == "exit":
        sys.exit(3)
    else:
        time.sleep(3600)
