// Users on the page: avatars, links to profiles, and names looked up for
// actors that arrive as bare ids.

import { isBare, nameOf } from "./activity.mjs";
import { client } from "./client.mjs";
import { h } from "./dom.mjs";
import { signedIn } from "./session.mjs";

const enc = encodeURIComponent;
const USER_CACHE_SIZE = 1000;

export function avatarSrc(user) {
  const own = user.profile && user.profile.avatar;
  // Only pictures this server serves: the page loads nothing from elsewhere
  // ("/\\evil.example/x.png" starts with one slash, yet leaves the origin).
  if (typeof own === "string" && own.startsWith("/")) {
    try {
      const url = new URL(own, location.origin);
      if (url.origin === location.origin) return url.pathname + url.search;
    } catch {
      // not a URL: the drawn avatar
    }
  }
  return `/app/avatars/${enc(user.id)}.svg`;
}

export function avatar(user, size = 40) {
  return h("img", {
    class: "avatar",
    src: avatarSrc(user),
    alt: "",
    width: size,
    height: size,
    loading: "lazy",
  });
}

// Users looked up by id, for what arrives unenriched (the firehose, comments).
const userCache = new Map();

export function lookUpUser(id) {
  if (!userCache.has(id)) {
    if (userCache.size >= USER_CACHE_SIZE) userCache.clear();
    userCache.set(
      id,
      client.getUser(id).catch(() => null),
    );
  }
  return userCache.get(id);
}

export function forgetUsers() {
  userCache.clear();
}

// Signed out, there is no token to look anyone up with.
export const worthLookingUp = (user) => signedIn() && isBare(user);

export function userLink(user) {
  const link = h("a", { class: "name", href: `#/u/${enc(user.id)}` }, nameOf(user));
  if (worthLookingUp(user)) {
    lookUpUser(user.id).then((found) => {
      if (found) link.textContent = nameOf(found);
    });
  }
  return link;
}
