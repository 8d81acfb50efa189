// Compiled by `tsc --noEmit -p clients/js` (make test), never run: uses of the
// client as a TypeScript caller writes them, through the package's own name,
// so the declarations the package exports are the ones checked.
import Client, { type Activity, type LiveEvent, pagesOf, TidingsError } from "tidings-client";

export async function uses(token: string): Promise<void> {
  const client = new Client("http://127.0.0.1:8000", () => token, { retries: 2 });
  const published = await client.publish("user:bob", { actor: "bob", verb: "post", object: "photo:1", foreign_id: "p1" });
  const created: boolean = published.created;
  const id: string = published.id;
  const page = await client.read("timeline:alice", { limit: 10, enrich: true, reactions: ["counts", "own"] });
  for (const item of page.results) {
    if ("group" in item) item.activity_count.toFixed();
    else item.verb.toUpperCase();
  }
  for await (const each of client.pages("timeline:alice", { limit: 100 })) each.next?.toLowerCase();
  for await (const rows of pagesOf((cursor) => client.followers("user:bob", { cursor }))) rows.results[0]?.created_at;
  const counts = await client.markRead("notification:alice");
  counts.unseen.toFixed();
  const as2 = await client.readAs2("user:bob");
  as2.orderedItems.length.toFixed();
  const like = await client.addReaction(id, { kind: "like", user: "alice" });
  like.children_counts["comment"];
  const user = await client.getUser("alice");
  user.counts.followers.toFixed();
  const stored = await client.putObject("photo", "1", { url: "/p/1.jpg" });
  stored.created === created;
  const filter = await client.addFilter("alice", ["spoiler"], { wholeWord: false, durationS: 60 });
  filter.contexts.join();
  const controller = new AbortController();
  for await (const event of client.events("timeline:alice", { enrich: true, signal: controller.signal })) {
    const e: LiveEvent = event;
    if (e.type === "activity.added") (e.data as Activity).id.length;
    controller.abort();
  }
  for await (const event of client.firehose({ track: ["coffee", "tea"] })) event.feed === "$firehose";
  const socket = await client.socket();
  await socket.subscribe("timeline:alice", { enrich: true });
  for await (const event of socket) event.id;
  socket.close();
  const raw = await client.request<{ pong: boolean }>("GET", "/v1/ping");
  raw.data.pong;
  try {
    await client.getUser("nobody");
  } catch (error) {
    if (error instanceof TidingsError) error.status + error.detail + (error.field ?? "") + (error.retryAfter ?? 0);
  }
}
