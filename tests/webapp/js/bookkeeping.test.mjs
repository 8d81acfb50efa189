// Live-event bookkeeping: reaction counts that events and the page's own
// requests both report (the client's SSE frames: clients/js/test/).
// node --test tests/webapp/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  applyReactionEvent,
  countOwnAdded,
  countOwnRemoved,
  entryOf,
  forgetAll,
  remember,
} from "../../../src/tidings/webapp/static/js/known.mjs";

test("an event's counts win, and the page's own answer is not counted twice", () => {
  forgetAll();
  const entry = remember({ id: "a1", reaction_counts: { like: 2 }, own_reactions: {} });
  // The event of alice's like arrives before the answer to her request.
  const like = { id: "r1", activity_id: "a1", kind: "like", user: "alice", reaction_counts: { like: 3 } };
  assert.equal(applyReactionEvent("reaction.added", like, "alice"), true);
  assert.deepEqual(entry.counts, { like: 3 });
  assert.deepEqual(entry.own.like.map((r) => r.id), ["r1"]);
  countOwnAdded(entry, "like", like);
  assert.equal(entry.counts.like, 3);
  // Removed by the page, whose answer comes first this time.
  countOwnRemoved(entry, "like", like);
  assert.equal(entry.counts.like, 2);
  const removed = { ...like, reaction_counts: { like: 2 } };
  applyReactionEvent("reaction.removed", removed, "alice");
  assert.equal(entry.counts.like, 2);
  assert.deepEqual(entry.own.like, []);
});

test("events about unknown activities, or replies to reactions, change nothing", () => {
  forgetAll();
  remember({ id: "a1", reaction_counts: { comment: 1 } });
  assert.equal(applyReactionEvent("reaction.added", { id: "r", activity_id: "zz", kind: "like" }, "al"), false);
  const reply = { id: "r2", activity_id: "a1", kind: "comment", parent: "r0", reaction_counts: {} };
  assert.equal(applyReactionEvent("reaction.added", reply, "al"), false);
  assert.deepEqual(entryOf("a1").counts, { comment: 1 });
  // A like already held (the answer is 200, not 201) is not counted again.
  countOwnAdded(entryOf("a1"), "like", { id: "r3" }, false);
  assert.equal(entryOf("a1").counts.like, undefined);
});

test("an event's activity keeps the counts a read brought", () => {
  forgetAll();
  remember({ id: "a1", reaction_counts: { like: 4 }, own_reactions: { like: [{ id: "r" }] } });
  const entry = remember({ id: "a1", verb: "post" });
  assert.deepEqual(entry.counts, { like: 4 });
  assert.equal(entry.activity.verb, "post");
});
