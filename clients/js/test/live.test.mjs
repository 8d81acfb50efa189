// Live events against a real server: SSE that resumes after a dropped
// connection with nothing missed or repeated, the firehose, and WebSocket.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Client, sseFrames, TidingsError } from "../tidings.mjs";
import { eventually, startProxy, startServer } from "./server.mjs";

let server;
let proxy;
let admin;

before(async () => {
  server = await startServer();
  proxy = await startProxy(server.url);
  admin = new Client(server.url, server.serverToken());
});

after(async () => {
  await proxy?.stop();
  await server?.stop();
});

const post = (actor, n) => ({ actor, verb: "post", object: `status:${actor}-${n}` });

// Reads `events` in the background into `got`; `opened` counts connections.
function collect(events) {
  const got = [];
  const done = (async () => {
    for await (const event of events) got.push(event);
  })();
  return { got, done };
}

test("SSE: a dropped stream resumes with Last-Event-ID, with no gap and no duplicate", async () => {
  await admin.follow("timeline:hana", "user:ivan");
  const client = new Client(proxy.url, server.token("hana"), { backoffMs: 50, maxBackoffMs: 200 });
  const controller = new AbortController();
  let opens = 0;
  const opened = () => (opens += 1);
  const { got, done } = collect(client.events("timeline:hana", { signal: controller.signal, onOpen: opened }));
  await eventually(() => opens === 1, 10_000, "the stream to open");
  for (const n of [1, 2, 3]) await admin.publish("user:ivan", post("ivan", n));
  await eventually(() => got.length === 3, 10_000, "three events");
  proxy.cutStreams();
  // Published while the stream is down (the client waits before opening it again).
  for (const n of [4, 5, 6]) await admin.publish("user:ivan", post("ivan", n));
  await eventually(() => got.length >= 6, 15_000, "six events");
  for (const n of [7, 8]) await admin.publish("user:ivan", post("ivan", n));
  await eventually(() => got.length >= 8, 10_000, "eight events");
  controller.abort();
  await done;
  assert.ok(opens >= 2, `opened ${opens} times`);
  assert.deepEqual(
    got.map((e) => e.data.object),
    [1, 2, 3, 4, 5, 6, 7, 8].map((n) => `status:ivan-${n}`),
  );
  assert.ok(got.every((e) => e.type === "activity.added" && e.feed === "timeline:hana"));
  assert.equal(new Set(got.map((e) => e.id)).size, 8);
  // The second connection asked for what came after the third event.
  const asked = proxy.requests("GET", "/v1/feeds/timeline/hana/events");
  assert.ok(asked.length >= 2);
  assert.equal(asked[0].headers["last-event-id"], undefined);
  assert.equal(asked[1].headers["last-event-id"], got[2].id);
  await eventually(() => proxy.openStreams() === 0, 5000, "the stream to close");
});

test("SSE: events after a given id, enriched; breaking out closes the stream", async () => {
  await admin.createUser({ id: "jo", handle: "jo", profile: { name: "Jo" } });
  await admin.follow("timeline:kim", "user:jo");
  const first = [];
  const stream = admin.events("timeline:kim", {
    onOpen: async () => {
      for (const n of [1, 2]) await admin.publish("user:jo", post("jo", n));
    },
  });
  for await (const event of stream) {
    first.push(event);
    if (first.length === 2) break;
  }
  await admin.publish("user:jo", post("jo", 3));
  const replayed = [];
  for await (const event of admin.events("timeline:kim", { lastEventId: first[0].id, enrich: true, fields: "name" })) {
    replayed.push(event);
    if (replayed.length === 2) break;
  }
  assert.deepEqual(replayed.map((e) => e.data.object), ["status:jo-2", "status:jo-3"]);
  assert.deepEqual(replayed[0].data.actor.profile, { name: "Jo" });
});

test("SSE: an event id no longer kept gets resync", async () => {
  for await (const event of admin.events("timeline:kim", { lastEventId: "0-0" })) {
    assert.deepEqual({ type: event.type, id: event.id }, { type: "resync", id: null });
    break;
  }
});

test("SSE: a refusal is thrown, not retried", async () => {
  const lee = new Client(proxy.url, server.token("lee"));
  const before = proxy.requests("GET", "/v1/feeds/timeline/kim/events").length;
  await assert.rejects(
    (async () => {
      for await (const _ of lee.events("timeline:kim")) assert.fail("no event");
    })(),
    (error) => error instanceof TidingsError && error.status === 403,
  );
  assert.equal(proxy.requests("GET", "/v1/feeds/timeline/kim/events").length, before + 1);
  const nobody = new Client(server.url, null);
  await assert.rejects(nobody.events("timeline:kim").next(), { status: 401 });
});

test("SSE: the firehose, filtered", async () => {
  let open;
  const opened = new Promise((resolve) => (open = resolve));
  const reading = (async () => {
    for await (const event of admin.firehose({ track: ["harbour"], onOpen: open })) return event;
  })();
  await opened;
  await admin.publish("user:mo", { actor: "mo", verb: "post", object: "status:m1", extra: { text: "coffee" } });
  await admin.publish("user:mo", { actor: "mo", verb: "post", object: "status:m2", extra: { text: "the harbour at dawn" } });
  const event = await reading;
  assert.equal(event.type, "activity.added");
  assert.equal(event.feed, "$firehose");
  assert.equal(event.data.object, "status:m2");
});

test("WebSocket: many feeds on one socket, replies, refusals, and the last ids", { skip: typeof WebSocket !== "function" && "no WebSocket in this Node (20: --experimental-websocket)" }, async () => {
  await admin.follow("timeline:nia", "user:olu");
  await admin.follow("timeline:nia", "user:pat");
  const nia = new Client(server.url, server.token("nia"));
  const socket = await nia.socket();
  assert.deepEqual(await socket.subscribe("timeline:nia"), { type: "subscribed", feed: "timeline:nia" });
  await assert.rejects(socket.subscribe("timeline:someone-else"), (error) => error.status === 400 && /may not/.test(error.detail));
  await admin.publish("user:olu", post("olu", 1));
  await admin.publish("user:pat", post("pat", 1));
  const got = [];
  for await (const event of socket) {
    got.push(event);
    if (got.length === 2) break;
  }
  assert.deepEqual(got.map((e) => [e.feed, e.type, e.data.object]), [
    ["timeline:nia", "activity.added", "status:olu-1"],
    ["timeline:nia", "activity.added", "status:pat-1"],
  ]);
  assert.equal(socket.lastEventIds["timeline:nia"], got[1].id);
  await eventually(() => socket.closed, 5000, "the socket to close");

  // A new socket takes up from the last id.
  await admin.publish("user:olu", post("olu", 2));
  const again = await nia.socket();
  await again.subscribe("timeline:nia", { lastEventId: got[1].id });
  for await (const event of again) {
    assert.equal(event.data.object, "status:olu-2");
    break;
  }
  const hose = await admin.socket();
  assert.deepEqual(await hose.subscribeFirehose({ track: ["tide"] }), { type: "subscribed", feed: "$firehose" });
  assert.deepEqual(await hose.unsubscribe("timeline:nia"), { type: "unsubscribed", feed: "timeline:nia" });
  hose.close();
  await assert.rejects(new Client(server.url, "not-a-token").socket(), TidingsError);
});

test("the SSE parser: CRLF and CR line ends, split chunks, comments, retry", async () => {
  const text = ': hi\r\nid: 1-0\r\nevent: a\r\ndata: {"x":\r\ndata: 1}\r\n\r\nretry: 30\rdata: plain\r\rid: 2-0\n\n';
  const bytes = new TextEncoder().encode(text);
  const body = new ReadableStream({
    start(controller) {
      for (let i = 0; i < bytes.length; i += 3) controller.enqueue(bytes.slice(i, i + 3));
      controller.close();
    },
  });
  const frames = [];
  for await (const frame of sseFrames(body)) frames.push(frame);
  assert.deepEqual(frames, [
    { event: "a", id: "1-0", data: '{"x":\n1}', retry: null },
    { event: "message", id: null, data: "plain", retry: 30 },
    { event: null, id: "2-0", data: "", retry: null },
  ]);
});
