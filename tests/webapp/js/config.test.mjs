// The page's config (feed paths: the client's, clients/js/test/): node --test tests/webapp/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import { followingGroups, parseConfig } from "../../../src/tidings/webapp/static/js/config.mjs";
import { notifyTargets } from "../../../src/tidings/webapp/static/js/notify.mjs";

const SERVED = {
  devSignIn: true,
  users: [{ id: "alice", handle: "alice", name: "Alice" }],
  groups: { home: "home", profile: "me", aggregated: "home_grouped", ranked: null, notifications: "alerts" },
};

test("the groups are the server's names", () => {
  const config = parseConfig(JSON.stringify(SERVED));
  assert.deepEqual(config.groups, SERVED.groups);
  assert.equal(config.devSignIn, true);
  assert.deepEqual(config.users, SERVED.users);
  // A ranked group the server has not: follows leave it out.
  assert.deepEqual(followingGroups(config.groups), ["home", "home_grouped"]);
});

test("a missing or malformed config is an app with nothing offered", () => {
  for (const text of [undefined, "", "not json", "null", "[]", '{"groups": 3}', '{"devSignIn": "yes"}']) {
    const config = parseConfig(text);
    assert.equal(config.devSignIn, false, String(text));
    assert.deepEqual(config.users, []);
    assert.deepEqual(Object.values(config.groups), [null, null, null, null, null]);
  }
  const odd = parseConfig('{"groups": {"home": "", "ranked": 7, "profile": "user"}}');
  assert.equal(odd.groups.home, null);
  assert.equal(odd.groups.ranked, null);
  assert.equal(odd.groups.profile, "user");
});

test("a reaction notifies the author in the server's notification group", () => {
  const activity = { actor: { id: "bob", handle: "bob", profile: {} } };
  assert.deepEqual(notifyTargets(activity, "alice", "alerts"), ["alerts:bob"]);
  assert.deepEqual(notifyTargets(activity, "bob", "alerts"), []);
  assert.deepEqual(notifyTargets({ actor: "bob" }, "alice", null), []);
});
