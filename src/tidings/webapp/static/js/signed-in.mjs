// What the signed-in user's pages share: their profile, the feeds they
// follow, who they mute, and the notification badge with its live stream.

import { setBadge } from "./badge.mjs";
import { client } from "./client.mjs";
import { followingGroups, groupOf } from "./config.mjs";
import { h } from "./dom.mjs";
import { Live } from "./live.mjs";
import { me, setMyProfile, setRelations } from "./session.mjs";
import { pagesOf } from "./tidings.mjs";
import { avatar } from "./users.mjs";

// Closers of what lives while signed in (the badge's stream).
let parts = [];

export function closeSignedIn() {
  for (const close of parts) close();
  parts = [];
}

export async function openSignedIn() {
  closeSignedIn();
  const user = me();
  const found = await client.getUser(user).catch(() => ({ id: user, handle: user, profile: {} }));
  const profile = { id: found.id, handle: found.handle, profile: found.profile };
  setMyProfile(profile);
  const following = await followedSources(user);
  // Your own posts belong in your timelines (counts leave this follow out).
  const own = `${groupOf("profile")}:${user}`;
  if (!following.includes(own)) {
    await client.followBatch(followingGroups().map((group) => ({ follower: `${group}:${user}`, source: own })));
    following.push(own);
  }
  const mutes = (await client.mutes(user)).results || [];
  setRelations(following, mutes.map((m) => m.target));
  document.getElementById("top").hidden = false;
  const name = document.getElementById("me-name");
  name.replaceChildren(avatar(profile, 28), " ", h("span", {}, `@${profile.handle}`));
  await watchBadge(user);
}

// Every source the user's home feed follows, page by page.
async function followedSources(user) {
  const sources = [];
  const home = `${groupOf("home")}:${user}`;
  for await (const page of pagesOf((cursor) => client.following(home, { limit: 100, cursor }))) {
    for (const row of page.results) sources.push(row.source);
  }
  return sources;
}

async function watchBadge(user) {
  const group = groupOf("notifications");
  if (!group) return; // no notification feeds on this server: no badge
  const feed = `${group}:${user}`;
  const live = new Live(
    (options) => client.events(feed, options),
    (type, data) => {
      if (type === "counts.changed") setBadge(data.unseen);
    },
  );
  parts.push(() => live.close());
  const first = await client.read(feed, { limit: 1 });
  setBadge(first.unseen || 0);
}
