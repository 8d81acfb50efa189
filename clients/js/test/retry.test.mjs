// Retries: idempotent calls (reads; publishes with a foreign_id) are tried
// again after a failure, others never. A proxy in front of a real server
// fails the requests the test names.
import assert from "node:assert/strict";
import { after, before, beforeEach, test } from "node:test";

import { Client, TidingsError } from "../tidings.mjs";
import { startProxy, startServer } from "./server.mjs";

let server;
let proxy;
let client;

before(async () => {
  server = await startServer();
  proxy = await startProxy(server.url);
});

after(async () => {
  await proxy?.stop();
  await server?.stop();
});

beforeEach(() => {
  proxy.seen.length = 0;
  client = new Client(proxy.url, server.serverToken(), { retries: 3, backoffMs: 5, maxBackoffMs: 50 });
});

const post = (n, more = {}) => ({ actor: "bob", verb: "post", object: `status:${n}`, ...more });

test("a read is retried after 503s and a dropped connection", async () => {
  await client.publish("user:bob", post(1, { foreign_id: "r1" }));
  proxy.fail("GET", "/v1/feeds/user/bob", { status: 503, times: 2 });
  proxy.fail("GET", "/v1/feeds/user/bob", { drop: true });
  const page = await client.read("user:bob");
  assert.equal(page.results.length, 1);
  assert.equal(proxy.requests("GET", "/v1/feeds/user/bob").length, 4);
});

test("a publish with a foreign_id is retried, and stored once", async () => {
  proxy.fail("POST", "/v1/feeds/user/bob/activities", { status: 502 });
  proxy.fail("POST", "/v1/feeds/user/bob/activities", { drop: true });
  const made = await client.publish("user:bob", post(2, { foreign_id: "r2" }));
  assert.equal(made.created, true);
  assert.equal(proxy.requests("POST", "/v1/feeds/user/bob/activities").length, 3);
  const batch = [post(3, { foreign_id: "r3" }), post(4, { foreign_id: "r4" })];
  proxy.fail("POST", "/v1/feeds/user/bob/activities:batch", { status: 503 });
  assert.equal((await client.publishBatch("user:bob", batch)).results.length, 2);
  assert.equal(proxy.requests("POST", "/v1/feeds/user/bob/activities:batch").length, 2);
});

test("a publish without a foreign_id, and other writes, are never retried", async () => {
  proxy.fail("POST", "/v1/feeds/user/bob/activities", { status: 503 });
  await assert.rejects(client.publish("user:bob", post(5)), { status: 503 });
  proxy.fail("POST", "/v1/feeds/user/bob/activities", { drop: true });
  await assert.rejects(client.publish("user:bob", post(6)), (error) => !(error instanceof TidingsError));
  assert.equal(proxy.requests("POST", "/v1/feeds/user/bob/activities").length, 2);
  // A batch where one activity lacks a foreign_id.
  proxy.fail("POST", "/v1/feeds/user/bob/activities:batch", { status: 503 });
  await assert.rejects(client.publishBatch("user:bob", [post(7, { foreign_id: "r7" }), post(8)]), { status: 503 });
  proxy.fail("POST", "/v1/feeds/timeline/amy/follows", { status: 503 });
  await assert.rejects(client.follow("timeline:amy", "user:bob"), { status: 503 });
  proxy.fail("POST", "/v1/users", { status: 500 });
  await assert.rejects(client.createUser({ id: "amy", handle: "amy" }), { status: 500 });
  proxy.fail("DELETE", "/v1/reactions/", { status: 503 });
  await assert.rejects(client.removeReaction("0".repeat(32)), { status: 503 });
  for (const [method, path] of [
    ["POST", "/v1/feeds/user/bob/activities:batch"],
    ["POST", "/v1/feeds/timeline/amy/follows"],
    ["POST", "/v1/users"],
    ["DELETE", "/v1/reactions/"],
  ]) {
    assert.equal(proxy.requests(method, path).length, 1, `${method} ${path}`);
  }
});

test("an answer retrying cannot change is not retried; retries end", async () => {
  await assert.rejects(client.getUser("ghost"), { status: 404 });
  assert.equal(proxy.requests("GET", "/v1/users/ghost").length, 1);
  proxy.fail("GET", "/v1/users/ghost", { status: 503, times: 10 });
  await assert.rejects(client.getUser("ghost"), { status: 503, detail: "injected by the test proxy" });
  assert.equal(proxy.requests("GET", "/v1/users/ghost").length, 1 + 4); // 1 + retries
});

test("Retry-After is honoured", async () => {
  proxy.fail("GET", "/healthz", { status: 429, headers: { "retry-after": "0" } });
  const started = Date.now();
  assert.equal((await client.health()).status, "ok");
  assert.ok(Date.now() - started < 1000);
  assert.equal(proxy.requests("GET", "/healthz").length, 2);
});
