// The words and numbers the web app shows: node --test tests/webapp/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  article,
  formatNumber,
  newActivities,
  pastTense,
  plural,
  refKind,
  relativeTime,
} from "../../../src/tidings/webapp/static/js/words.mjs";

test("past tense: known verbs, then -d after e, else -ed", () => {
  const cases = [
    ["post", "posted"],
    ["comment", "commented on"],
    ["follow", "followed"],
    ["share", "shared"],
    ["like", "liked"],
    ["rate", "rated"],
    ["watch", "watched"],
  ];
  for (const [verb, said] of cases) assert.equal(pastTense(verb), said, verb);
});

test("plurals", () => {
  const cases = [
    ["photo", 1, "photo"],
    ["photo", 0, "photos"],
    ["photo", 2, "photos"],
    ["person", 3, "people"],
    ["story", 2, "stories"],
    ["day", 2, "days"],
    ["box", 2, "boxes"],
    ["status", 2, "statuses"],
    ["match", 2, "matches"],
    ["wish", 2, "wishes"],
    ["activity", 2, "activities"],
  ];
  for (const [word, count, said] of cases) assert.equal(plural(word, count), said, `${word} ${count}`);
});

test("articles and kinds of references", () => {
  assert.equal(article("photo"), "a photo");
  assert.equal(article("item"), "an item");
  assert.equal(refKind("photo:12"), "photo");
  assert.equal(refKind("status:alice-1:x"), "status");
  assert.equal(refKind("plain"), "item");
  assert.equal(refKind(":odd"), "item");
  assert.equal(refKind(null), "item");
  assert.equal(refKind({ type: "album", id: "album:1" }), "album");
  assert.equal(refKind({ id: "x" }), "item");
});

test("relative time counts from the now it is given", () => {
  const now = Date.parse("2026-11-27T12:00:00Z");
  const ago = (seconds) => new Date(now - seconds * 1000).toISOString();
  const cases = [
    [0, "now"],
    [44, "now"],
    [46, "1m"],
    [5 * 60, "5m"],
    [59 * 60, "59m"],
    [3600, "1h"],
    [23 * 3600, "23h"],
    [86_400, "1d"],
    [6 * 86_400, "6d"],
  ];
  for (const [seconds, said] of cases) assert.equal(relativeTime(ago(seconds), now), said, `${seconds}s`);
  // From a clock a little behind the server's: never "in the future".
  assert.equal(relativeTime(ago(-30), now), "now");
  // A week or more: the date, as the reader's locale writes it.
  const old = ago(8 * 86_400);
  const date = new Date(old).toLocaleDateString(undefined, { month: "short", day: "numeric" });
  assert.equal(relativeTime(old, now), date);
});

test("numbers: integers as they are, others to a few digits", () => {
  assert.equal(formatNumber(3), "3");
  assert.equal(formatNumber(1.23456), "1.235");
  assert.equal(formatNumber(-0.5), "-0.500");
  assert.equal(formatNumber(123.456), "123.5");
  assert.equal(formatNumber("n/a"), "n/a");
  assert.equal(newActivities(1), "1 new activity");
  assert.equal(newActivities(3), "3 new activities");
});
