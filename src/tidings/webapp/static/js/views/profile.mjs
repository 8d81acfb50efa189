// A user's profile (#/u/<id>): counts, their activities, Follow and Mute.

import { nameOf } from "../activity.mjs";
import { client } from "../client.mjs";
import { followingGroups, groupOf } from "../config.mjs";
import { alertBox, h, toast } from "../dom.mjs";
import { activityList } from "../lists.mjs";
import { isFollowing, isMuted, me, setFollowing, setMuted } from "../session.mjs";
import { avatar } from "../users.mjs";

export async function profileView(root, userId) {
  const card = h("section", { class: "profile", "aria-label": "Profile" }, h("p", { class: "muted" }, "Loading profile…"));
  const list = activityList({
    feed: `${groupOf("profile")}:${userId}`,
    label: `Activities of ${userId}`,
    empty: "No activities yet.",
  });
  root.append(card, h("h2", {}, "Activity"), list.el);
  list.next();
  const paint = async () => {
    let user;
    try {
      user = await client.getUser(userId);
    } catch (error) {
      if (error.status !== 404) {
        card.replaceChildren(alertBox(error.message));
        return;
      }
      user = { id: userId, handle: userId, profile: {}, counts: null };
    }
    card.replaceChildren(avatar(user, 96), profileBody(user, paint));
  };
  await paint();
  return () => list.close();
}

function profileBody(user, paint) {
  const counts = user.counts || {};
  return h(
    "div",
    {},
    h("h1", {}, nameOf(user)),
    h("p", { class: "handle" }, `@${user.handle}`),
    user.profile.bio ? h("p", {}, user.profile.bio) : null,
    h(
      "dl",
      { class: "counts" },
      countItem("followers", counts.followers),
      countItem("following", counts.following),
      countItem("activities", counts.activities),
    ),
    user.id === me() ? h("p", {}, h("a", { href: "#/notifications" }, "Your notifications")) : profileButtons(user, paint),
  );
}

function profileButtons(user, paint) {
  const following = isFollowing(`${groupOf("profile")}:${user.id}`);
  const muted = isMuted(user.id);
  return h(
    "div",
    { class: "toolbar" },
    h(
      "button",
      {
        type: "button",
        class: following ? "" : "primary",
        id: "follow",
        onclick: (event) => follow(event.currentTarget, user, !following).then(paint),
      },
      following ? "Unfollow" : "Follow",
    ),
    h(
      "button",
      { type: "button", id: "mute", onclick: (event) => mute(event.currentTarget, user, !muted).then(paint) },
      muted ? "Unmute" : "Mute",
    ),
  );
}

function countItem(name, value) {
  const shown = typeof value === "number" ? value.toLocaleString("en-US") : "–";
  return h("div", { dataset: { count: name } }, h("dt", {}, name), h("dd", {}, shown));
}

// The user's timelines follow (or stop following) the profile feed together.
async function follow(button, user, on) {
  button.disabled = true;
  const source = `${groupOf("profile")}:${user.id}`;
  try {
    if (on) {
      await client.followBatch(followingGroups().map((group) => ({ follower: `${group}:${me()}`, source })));
      setFollowing(source, true);
      toast(`Following @${user.handle}.`);
    } else {
      for (const group of followingGroups()) {
        await client.unfollow(`${group}:${me()}`, source).catch((error) => {
          if (error.status !== 404) throw error;
        });
      }
      setFollowing(source, false);
      toast(`No longer following @${user.handle}.`);
    }
  } catch (error) {
    toast(`Could not ${on ? "follow" : "unfollow"}: ${error.message}`);
  }
}

async function mute(button, user, on) {
  button.disabled = true;
  try {
    if (on) {
      await client.mute(me(), user.id);
      setMuted(user.id, true);
      toast(`Muted @${user.handle}: their activities are hidden from your feeds.`);
    } else {
      await client.unmute(me(), user.id);
      setMuted(user.id, false);
      toast(`Unmuted @${user.handle}.`);
    }
  } catch (error) {
    toast(`Could not ${on ? "mute" : "unmute"}: ${error.message}`);
  }
}
