// Group sentences ("bob and 2 others liked 3 photos"): node --test tests/webapp/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import { describe as describeActivity, subjectOf } from "../../../src/tidings/webapp/static/js/activity.mjs";
import { groupSentence } from "../../../src/tidings/webapp/static/js/group-sentence.mjs";

const bob = { id: "bob", handle: "bob", profile: { name: "Bob Berg" } };
const carol = { id: "carol", handle: "carol", profile: {} };

// The sentence with users as their ids in brackets (the card makes them links).
const said = (group, options) =>
  groupSentence(group, options)
    .map((part) => (typeof part === "string" ? part : `[${part.user.id}]`))
    .join("");

const like = (actor, object) => ({ actor, verb: "like", object });

test("one actor, one thing", () => {
  const group = { activities: [like(bob, "photo:1")], actor_count: 1, activity_count: 1 };
  assert.equal(said(group), "[bob] liked a photo");
  assert.equal(said(group, { notification: true }), "[bob] liked your photo");
});

test("two actors are both named", () => {
  const group = {
    activities: [like(bob, "photo:1"), like(carol, "photo:1")],
    actor_count: 2,
    activity_count: 2,
  };
  assert.equal(said(group, { notification: true }), "[bob] and [carol] liked your photo");
});

test("more actors are counted, several things counted too", () => {
  const group = {
    activities: [like(bob, "photo:1"), like(carol, "photo:2"), like("dave", "photo:3")],
    actor_count: 5,
    activity_count: 3,
  };
  assert.equal(said(group), "[bob] and 4 others liked 3 photos");
});

test("two people, only one activity held: the other is counted", () => {
  const group = { activities: [like(bob, "photo:1")], actor_count: 2, activity_count: 2 };
  assert.equal(said(group), "[bob] and 1 other liked a photo");
});

test("posts, and mentions in notifications", () => {
  const post = (n) => ({ actor: "bob", verb: "post", object: `status:${n}` });
  assert.equal(said({ activities: [post(1)], actor_count: 1, activity_count: 1 }), "[bob] posted a status");
  assert.equal(
    said({ activities: [post(1), post(2)], actor_count: 1, activity_count: 2 }),
    "[bob] posted 2 statuses",
  );
  assert.equal(
    said({ activities: [post(1)], actor_count: 1, activity_count: 1 }, { notification: true }),
    "[bob] mentioned you in a status",
  );
});

test("a comment is about the post it targets, not the activity it notifies", () => {
  const comment = { actor: "bob", verb: "comment", object: "comment:9", target: "status:alice-1" };
  assert.equal(subjectOf(comment), "status:alice-1");
  assert.equal(describeActivity(comment), "commented on a status");
  const notified = { ...comment, target: "activity:123" };
  assert.equal(subjectOf(notified), "comment:9");
  const named = { actor: "bob", verb: "like", object: { id: "place:1", data: { name: "the harbour" } } };
  assert.equal(describeActivity(named), "liked the harbour");
});
