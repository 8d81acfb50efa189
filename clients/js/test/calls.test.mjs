// Every call of the client against a real `tidings serve`.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Client, feedPath, pagesOf, TidingsError } from "../tidings.mjs";
import { eventually, startServer } from "./server.mjs";

let server;
let admin; // a server token's client
let alice; // alice's user token's client

before(async () => {
  server = await startServer();
  admin = new Client(server.url, server.serverToken(), { backoffMs: 10 });
  alice = new Client(server.url, () => server.token("alice"), { backoffMs: 10 });
});

after(async () => {
  await server?.stop();
});

const post = (actor, n, more = {}) => ({ actor, verb: "post", object: `status:${actor}-${n}`, ...more });

describe("users and objects", () => {
  test("create, look up, rename, delete a user", async () => {
    const made = await admin.createUser({ id: "carol", handle: "Carol", profile: { name: "Carol C." } });
    assert.deepEqual(made, {
      id: "carol",
      handle: "Carol",
      profile: { name: "Carol C." },
      counts: { followers: 0, following: 0, activities: 0 },
    });
    assert.equal((await admin.getUser("carol")).handle, "Carol");
    assert.equal((await admin.userByHandle("CAROL")).id, "carol");
    const renamed = await admin.updateUser("carol", { handle: "Caro", profile: { name: "Caro" } });
    assert.equal(renamed.handle, "Caro");
    assert.deepEqual(renamed.profile, { name: "Caro" });
    assert.equal(await admin.deleteUser("carol"), undefined);
    await assert.rejects(admin.getUser("carol"), (e) => e instanceof TidingsError && e.status === 404);
  });

  test("put (created, then replaced), get and delete an object", async () => {
    const first = await admin.putObject("photo", "1", { url: "/p/1.jpg" });
    assert.equal(first.created, true);
    // `created` is not one of the API's fields: the JSON stays the server's.
    assert.deepEqual(JSON.parse(JSON.stringify(first)), { type: "photo", id: "1", data: { url: "/p/1.jpg" } });
    const again = await admin.putObject("photo", "1", { url: "/p/1b.jpg" });
    assert.equal(again.created, false);
    assert.deepEqual(await admin.getObject("photo", "1"), { type: "photo", id: "1", data: { url: "/p/1b.jpg" } });
    await admin.deleteObject("photo", "1");
    await assert.rejects(admin.getObject("photo", "1"), { status: 404 });
  });
});

describe("activities and reads", () => {
  test("publish one (foreign_id repeats: the stored one), look it up, change, remove", async () => {
    const made = await admin.publish("user:bob", post("bob", 1, { foreign_id: "b1", extra: { text: "hi" } }));
    assert.equal(made.created, true);
    assert.match(made.id, /^[0-9a-f]{32}$/);
    assert.deepEqual(Object.keys(made).sort(), ["actor", "extra", "foreign_id", "id", "object", "target", "time", "to", "verb"]);
    const repeat = await admin.publish("user:bob", post("bob", 1, { foreign_id: "b1", extra: { text: "hi" } }));
    assert.equal(repeat.created, false);
    assert.equal(repeat.id, made.id);
    assert.equal((await admin.activityByForeignId("user:bob", "b1")).id, made.id);
    await admin.createUser({ id: "bob", handle: "bob", profile: { name: "Bob" } });
    const enriched = await admin.getActivity(made.id, { enrich: true, fields: "name" });
    assert.deepEqual(enriched.actor.profile, { name: "Bob" });
    const changed = await admin.updateActivity(made.id, { set: { text: "hello" }, unset: [] });
    assert.deepEqual(changed.extra, { text: "hello" });
    await admin.removeActivity("user:bob", made.id);
    await assert.rejects(admin.getActivity(made.id), { status: 404 });
    await admin.publish("user:bob", post("bob", 2, { foreign_id: "b2" }));
    await admin.removeByForeignId("user:bob", "b2");
    await assert.rejects(admin.activityByForeignId("user:bob", "b2"), { status: 404 });
  });

  test("a batch, every page by cursor, AS2, stats", async () => {
    const batch = await admin.publishBatch(
      "user:dan",
      [1, 2, 3, 4, 5].map((n) => post("dan", n, { foreign_id: `d${n}` })),
    );
    assert.equal(batch.results.length, 5);
    assert.ok(batch.results.every((r) => r.created === true && r.activity.actor === "dan"));
    const pages = [];
    for await (const page of admin.pages("user:dan", { limit: 2 })) pages.push(page);
    assert.deepEqual(pages.map((p) => p.results.length), [2, 2, 1]);
    assert.equal(pages.at(-1).next, null);
    const objects = pages.flatMap((p) => p.results.map((a) => a.object));
    // One batch shares a time: every activity once, whatever their order.
    assert.deepEqual(objects.toSorted(), [1, 2, 3, 4, 5].map((n) => `status:dan-${n}`));
    // Any cursor-paged call pages the same way.
    const viaHelper = [];
    for await (const page of pagesOf((cursor) => admin.read("user:dan", { limit: 3, cursor }))) viaHelper.push(page);
    assert.equal(viaHelper.length, 2);
    const as2 = await admin.readAs2("user:dan", { limit: 2 });
    assert.equal(as2.type, "OrderedCollectionPage");
    assert.equal(as2.orderedItems.length, 2);
    assert.deepEqual(await admin.stats("user:dan"), { followers: 0, following: 0, activities: 5 });
  });

  test("follow, follow a batch, followers, following, unfollow; flat, ranked and grouped reads", async () => {
    await admin.publish("user:erin", post("erin", 1));
    const followed = await admin.follow("timeline:frank", "user:erin", { copyLimit: 10 });
    assert.deepEqual(followed, { follower: "timeline:frank", source: "user:erin", created: true });
    assert.equal((await admin.follow("timeline:frank", "user:erin")).created, false);
    const batch = await admin.followBatch([
      { follower: "timeline_ranked:frank", source: "user:erin" },
      { follower: "timeline_aggregated:frank", source: "user:erin" },
    ]);
    assert.equal(batch.created.length, 2);
    const followers = await admin.followers("user:erin", { limit: 10 });
    assert.deepEqual(followers.results.map((r) => r.follower).sort(), [
      "timeline:frank",
      "timeline_aggregated:frank",
      "timeline_ranked:frank",
    ]);
    assert.ok(followers.results.every((r) => typeof r.created_at === "string"));
    assert.equal(followers.next, null);
    const following = await admin.following("timeline:frank");
    assert.deepEqual(following.results.map((r) => r.source), ["user:erin"]);
    await admin.publish("user:erin", post("erin", 2));
    const flat = await eventually(async () => {
      const page = await admin.read("timeline:frank");
      return page.results.length === 2 && page;
    });
    assert.equal(flat.results[0].object, "status:erin-2");
    const ranked = await eventually(async () => {
      const page = await admin.read("timeline_ranked:frank", { explain: true });
      return page.results.length === 2 && page;
    });
    assert.equal(typeof ranked.results[0].score, "number");
    assert.equal(typeof ranked.results[0].explain, "object");
    const grouped = await eventually(async () => {
      const page = await admin.read("timeline_aggregated:frank", { enrich: true });
      return page.results.length && page.results[0].activity_count === 2 && page;
    });
    assert.equal(grouped.results[0].verb, "post");
    await admin.unfollow("timeline:frank", "user:erin", { keepHistory: true });
    assert.deepEqual((await admin.following("timeline:frank")).results, []);
    assert.equal((await admin.read("timeline:frank")).results.length, 2);
  });
});

describe("reactions and notifications", () => {
  test("react, page, children, change, remove; mark seen and read", async () => {
    const activity = await admin.publish("user:gina", post("gina", 1));
    const like = await alice.addReaction(activity.id, { kind: "like", user: "alice", to: ["notification:gina"] });
    assert.equal(like.created, true);
    assert.equal(like.kind, "like");
    assert.equal((await alice.addReaction(activity.id, { kind: "like", user: "alice" })).created, false);
    const comment = await admin.addReaction(activity.id, { kind: "comment", user: "gina", data: { text: "thanks" } });
    const reply = await admin.addReaction(activity.id, { kind: "comment", user: "alice", data: { text: "yw" }, parent: comment.id });
    assert.deepEqual((await admin.reactions(activity.id, { kind: "like" })).results.map((r) => r.id), [like.id]);
    assert.equal((await admin.reactions(activity.id)).results.length, 2);
    assert.equal((await admin.getReaction(comment.id)).children_counts.comment, 1);
    assert.deepEqual((await admin.reactionChildren(comment.id)).results.map((r) => r.id), [reply.id]);
    assert.deepEqual((await admin.updateReaction(reply.id, { text: "you're welcome" })).data, { text: "you're welcome" });
    await admin.removeReaction(reply.id, { soft: true });
    await assert.rejects(admin.getReaction(reply.id), { status: 404 });
    assert.equal((await admin.restoreReaction(reply.id)).id, reply.id);
    await admin.removeReaction(reply.id);
    await assert.rejects(admin.getReaction(reply.id), { status: 404 });
    await assert.rejects(admin.restoreReaction(reply.id), { status: 404 });

    const gina = new Client(server.url, server.token("gina"));
    const page = await eventually(async () => {
      const got = await gina.read("notification:gina");
      return got.results.length && got;
    });
    assert.equal(page.unseen, 1);
    assert.deepEqual(await gina.markSeen("notification:gina", [page.results[0].group]), { unseen: 0, unread: 1 });
    assert.deepEqual(await gina.markRead("notification:gina"), { unseen: 0, unread: 0 });
    const marked = await gina.read("notification:gina", { markSeen: true });
    assert.equal(marked.results[0].is_read, true);
  });
});

describe("rules", () => {
  test("mutes, blocks and filters: add, list, delete", async () => {
    const mute = await alice.mute("alice", "spammer", { durationS: 3600, notifications: false });
    assert.equal(mute.target, "spammer");
    assert.equal(mute.notifications, false);
    assert.equal(typeof mute.until_ms, "number");
    assert.deepEqual((await alice.mutes("alice")).results.map((m) => m.target), ["spammer"]);
    await alice.unmute("alice", "spammer");
    assert.deepEqual((await alice.mutes("alice")).results, []);
    assert.deepEqual(await alice.block("alice", "troll"), { target: "troll" });
    assert.deepEqual(await alice.blocks("alice"), { results: [{ target: "troll" }] });
    await alice.unblock("alice", "troll");
    assert.deepEqual((await alice.blocks("alice")).results, []);
    const filter = await alice.addFilter("alice", ["spoiler"], { wholeWord: false, contexts: ["timeline"] });
    assert.deepEqual(
      { keywords: filter.keywords, whole_word: filter.whole_word, contexts: filter.contexts, action: filter.action },
      { keywords: ["spoiler"], whole_word: false, contexts: ["timeline"], action: "hide" },
    );
    assert.deepEqual((await alice.filters("alice")).results.map((f) => f.id), [filter.id]);
    await alice.deleteFilter("alice", filter.id);
    assert.deepEqual((await alice.filters("alice")).results, []);
  });

  test("health", async () => {
    const health = await admin.health();
    assert.equal(health.status, "ok");
    assert.equal(typeof health.pending_deliveries, "number");
  });
});

describe("errors carry the problem", () => {
  test("404, 422 naming the field, 401, 403; onError hears each", async () => {
    const heard = [];
    const client = new Client(server.url, server.serverToken(), { onError: (e) => heard.push(e.status) });
    await assert.rejects(client.getUser("nobody-at-all"), (error) => {
      assert.ok(error instanceof TidingsError);
      assert.ok(error instanceof Error);
      assert.equal(error.status, 404);
      assert.equal(error.title, "Not Found");
      assert.match(error.detail, /nobody-at-all/);
      assert.equal(error.message, error.detail);
      assert.equal(error.type, "https://tidings.dev/problems/not-found");
      return true;
    });
    await assert.rejects(client.read("timeline:alice", { limit: 100000 }), (error) => {
      assert.equal(error.status, 422);
      assert.equal(error.field, "limit");
      assert.equal(error.problem.field, "limit");
      return true;
    });
    await assert.rejects(client.publish("user:bob", { actor: "bob", verb: "post", object: "x:1", bogus: 1 }), {
      status: 422,
      field: "bogus",
    });
    await assert.rejects(new Client(server.url).getUser("alice"), { status: 401, title: "Unauthorized" });
    await assert.rejects(alice.publish("user:bob", post("bob", 9)), (error) => {
      assert.equal(error.status, 403);
      assert.match(error.detail, /may not add to user:bob/);
      return true;
    });
    assert.deepEqual(heard, [404, 422, 422]);
  });

  test("a feed id that is none is refused before any request", () => {
    assert.throws(() => feedPath("nocolon"), TypeError);
    assert.equal(feedPath("timeline:a:b/c"), "/v1/feeds/timeline/a%3Ab%2Fc");
    assert.equal(feedPath("home:a@b"), "/v1/feeds/home/a%40b");
  });
});
