// Server notifications (`session.compactionPending` with notifyBeforeAuto): the sidecar hands
// them to the plugin's log instead of mistaking them for answers, and unknown ones are ignored.
//
//   node --test integrations/openclaw/test/*.test.js     (CTXHOST_BIN overrides the binary)

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { describeNotification } from "../../client/sidecar.js";
import { bigTurn, setup, skipServe, smallWindow, tempHome } from "../test-support/harness.js";

const KEY = "agent:main:notify";
const SID = "5e1f-notify";

test("describeNotification words compactionPending and ignores what it does not know", () => {
  const text = describeNotification("session.compactionPending", {
    sessionKey: KEY,
    message: "automatic compaction of session `agent:main:notify`: over the threshold",
  });
  assert.equal(text, "ctxhost: automatic compaction of session `agent:main:notify`: over the threshold");
  assert.match(describeNotification("session.compactionPending", { sessionKey: KEY }) ?? "", /agent:main:notify is about to run/);
  assert.equal(describeNotification("session.somethingNew", {}), null);
});

describe("notifyBeforeAuto through ctxhost serve", { skip: skipServe(), concurrency: false }, () => {
  for (const notify of [true, false]) {
    test(`notifyBeforeAuto: ${notify} ${notify ? "logs" : "does not log"} the pending compaction, and the assemble still answers`, async (t) => {
      const config = smallWindow("legacy", 4000);
      config.agents.defaults.compaction.notifyBeforeAuto = notify;
      const home = tempHome(config);
      const s = setup({ home });
      t.after(s.cleanup);
      await s.engine.bootstrap({ sessionId: SID, sessionKey: KEY, sessionFile: KEY });
      const history = [];
      for (const [i, messages] of [bigTurn("alpha"), bigTurn("beta"), bigTurn("gamma"), bigTurn("delta")].entries()) {
        await s.engine.commitTurn({ sessionId: SID, sessionKey: KEY, advancementKey: `turn-${i}`, messages });
        history.push(...messages);
      }
      const out = await s.engine.assemble({ sessionId: SID, sessionKey: KEY, messages: history, tokenBudget: 100_000 });
      assert.ok(out.messages.some((m) => m.__ctxhost?.inserted), "the compaction ran");
      const told = s.logs.filter((l) => l.startsWith("info: ctxhost: automatic compaction of session"));
      assert.equal(told.length, notify ? 1 : 0, s.logs.join("\n"));
      assert.deepEqual(s.logs.filter((l) => l.includes("unknown or expired request id")), []);
    });
  }
});
