// getstream's own JS client (npm `getstream`) against `tidings serve`, as a
// browser uses it: a user token the backend minted, `urlOverride` pointing at
// tidings, and `feed.subscribe` for realtime (Faye, over a WebSocket).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import stream from "getstream";

import { eventually } from "../../clients/js/test/server.mjs";
import { KEY, SECRET, startServer } from "./server.mjs";

const APP_ID = "1234";
let server;
const opened = [];

before(async () => {
  server = await startServer();
});

after(async () => {
  for (const client of opened) await client.fayeClient?.disconnect();
  await server?.stop();
});

// What a browser holds: the api key, a user token from the backend, the app id.
function browserClient(userId) {
  const backend = stream.connect(KEY, SECRET);
  const options = {
    browser: true,
    urlOverride: { api: `${server.url}/api/` },
    fayeUrl: `${server.url}/api/v1.0/faye`,
  };
  const client = stream.connect(KEY, backend.createUserToken(userId), APP_ID, options);
  opened.push(client);
  return client;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

test("a user adds to its feed, reads it, follows, reads its timeline, removes", async () => {
  const ana = browserClient("ana");
  const ben = browserClient("ben");
  const added = await ana.feed("user").addActivity({ verb: "post", object: "post:1", mood: "calm" });
  assert.match(added.id, UUID);
  assert.equal(added.actor, "SU:ana"); // the client's default actor: its user
  assert.equal(added.mood, "calm"); // a custom field, at the top level
  assert.match(added.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}$/);

  const own = await ana.feed("user").get({ limit: 5 });
  assert.deepEqual(own.results.map((a) => a.id), [added.id]);
  assert.match(own.duration, /ms$/);

  const theirs = await ben.feed("user").addActivity({ verb: "post", object: "post:2" });
  await ana.feed("timeline").follow("user", "ben");
  const following = await ana.feed("timeline").following();
  assert.deepEqual(following.results.map((f) => f.target_id), ["user:ben"]);
  const timeline = await ana.feed("timeline").get({ limit: 5 });
  assert.deepEqual(timeline.results.map((a) => a.id), [theirs.id]);

  const removed = await ana.feed("user").removeActivity(added.id);
  assert.equal(removed.removed, added.id);
  assert.deepEqual((await ana.feed("user").get()).results, []);
  await ana.feed("timeline").unfollow("user", "ben");
  assert.deepEqual((await ana.feed("timeline").following()).results, []);
});

test("a user token is refused on another user's feed, in Stream's error shape", async () => {
  const ana = browserClient("ana");
  const refusals = [
    () => ana.feed("timeline", "ben").get(),
    () => ana.feed("user", "ben").addActivity({ verb: "post", object: "post:3" }),
    () => ana.feed("timeline", "ben").follow("user", "ana"),
  ];
  for (const refused of refusals) {
    await assert.rejects(refused, (error) => {
      assert.ok(error instanceof stream.StreamApiError);
      assert.equal(error.response.status, 403);
      assert.equal(error.error.code, 17);
      assert.equal(error.error.exception, "NotAllowedException");
      return true;
    });
  }
});

test("feed.subscribe receives added and removed activities as Stream's realtime messages", async () => {
  const cho = browserClient("cho");
  const dan = browserClient("dan");
  await cho.feed("timeline").follow("user", "dan");
  const got = [];
  const timeline = cho.feed("timeline");
  await timeline.subscribe((message) => got.push(message));

  const first = await dan.feed("user").addActivity({ verb: "post", object: "post:4", mood: "glad" });
  await eventually(() => got.length === 1, 10_000, "the new activity");
  const [news] = got;
  assert.equal(news.feed, "timeline:cho");
  assert.equal(news.app_id, APP_ID);
  assert.deepEqual(news.deleted, []);
  assert.equal(news.new.length, 1);
  assert.equal(news.new[0].id, first.id);
  assert.equal(news.new[0].actor, "SU:dan");
  assert.equal(news.new[0].mood, "glad");
  assert.ok(!Number.isNaN(Date.parse(news.published_at)));

  await dan.feed("user").removeActivity(first.id);
  await eventually(() => got.length === 2, 10_000, "the removal");
  assert.deepEqual(got[1].deleted, [first.id]);
  assert.deepEqual(got[1].new, []);

  // A channel of someone else's feed is refused at subscribe.
  const other = cho.feed("timeline", "dan");
  await assert.rejects(
    () => new Promise((resolve, reject) => other.subscribe(() => {}).then(resolve, reject)),
    (error) => /^403:/.test(error.message),
  );
  timeline.unsubscribe();
});

test("a notification feed's subscription gets each activity that reaches it, with its group", async () => {
  // A notification bell: eve's browser listens to her notification feed, and
  // fay's like addressed to it arrives as the activity, with its group and the
  // feed it was published in.
  const eve = browserClient("eve");
  const fay = browserClient("fay");
  const got = [];
  const bell = eve.feed("notification");
  await bell.subscribe((message) => got.push(message));

  const like = { verb: "like", object: "photo:7", to: ["notification:eve"], foreign_id: "like:7" };
  const liked = await fay.feed("user").addActivity(like);
  await eventually(() => got.length === 1, 10_000, "the notification");
  const [note] = got;
  assert.equal(note.feed, "notification:eve");
  assert.equal(note.app_id, APP_ID);
  assert.deepEqual(note.deleted, []);
  assert.equal(note.new.length, 1);
  assert.equal(note.new[0].id, liked.id);
  assert.equal(note.new[0].verb, "like");
  assert.equal(note.new[0].origin, "user:fay");
  const page = await bell.get({ limit: 5 });
  assert.equal(note.new[0].group, page.results[0].group);
  assert.equal(page.unseen, 1);

  // Her bell opened: the read marks every group seen, and says so.
  await bell.get({ limit: 5, mark_seen: true });
  await eventually(() => got.length === 2, 10_000, "the mark");
  assert.equal(got[1].mark_seen, "all");
  assert.equal(got[1].mark_read, undefined);
  assert.deepEqual([got[1].new, got[1].deleted], [[], []]);

  await fay.feed("user").removeActivity(liked.id);
  await eventually(() => got.length === 3, 10_000, "the removal");
  assert.deepEqual(got[2].deleted, [liked.id]);
  assert.deepEqual(got[2].deleted_foreign_ids, [["like:7", liked.time]]);
  assert.deepEqual(got[2].new, []);
  bell.unsubscribe();
});

test("a user soft-deletes its own reaction and restores it; another user may not", async () => {
  const eli = browserClient("eli");
  const fay = browserClient("fay");
  const post = await eli.feed("user").addActivity({ verb: "post", object: "post:5" });
  const comment = await fay.reactions.add("comment", post.id, { text: "first" });
  const listed = async () =>
    (await eli.reactions.filter({ activity_id: post.id })).results.map((r) => r.id);
  assert.deepEqual(await listed(), [comment.id]);

  await assert.rejects(() => eli.reactions.delete(comment.id, true), (error) => {
    assert.equal(error.error.code, 17);
    return true;
  });
  await fay.reactions.delete(comment.id, true);
  assert.deepEqual(await listed(), []);
  const [read] = (await eli.feed("user").get({ withReactionCounts: true })).results;
  assert.deepEqual(read.reaction_counts, {});
  await assert.rejects(() => eli.reactions.restore(comment.id), (error) => {
    assert.equal(error.error.code, 17);
    return true;
  });

  await fay.reactions.restore(comment.id);
  assert.deepEqual(await listed(), [comment.id]);
  const [again] = (await eli.feed("user").get({ withReactionCounts: true })).results;
  assert.deepEqual(again.reaction_counts, { comment: 1 });
  await assert.rejects(() => fay.reactions.restore(comment.id), (error) => {
    assert.equal(error.response.status, 404);
    assert.equal(error.error.code, 16);
    assert.equal(error.error.exception, "DoesNotExistException");
    return true;
  });
});
