// Hash routes (#/home, #/u/bob) to views. A view returns (or resolves to)
// the function that closes what it opened (streams, observers), called when
// the next view replaces it.

import { forgetAll } from "./known.mjs";
import { groupOf } from "./config.mjs";
import { main } from "./dom.mjs";
import { endSession, me, signedIn, startSession } from "./session.mjs";
import { closeSignedIn, openSignedIn } from "./signed-in.mjs";
import { forgetUsers } from "./users.mjs";
import { aggregatedView } from "./views/aggregated.mjs";
import { firehoseView } from "./views/firehose.mjs";
import { homeView } from "./views/home.mjs";
import { notificationsView } from "./views/notifications.mjs";
import { profileView } from "./views/profile.mjs";
import { rankedView } from "./views/ranked.mjs";
import { signInView } from "./views/sign-in.mjs";

const enc = encodeURIComponent;

// [pattern, nav link, view, title, the feed group role it reads (a server
// without that group has no such page)]
const ROUTES = [
  [/^#\/home$/, "home", homeView, "Home", "home"],
  [/^#\/aggregated$/, "aggregated", aggregatedView, "Grouped", "aggregated"],
  [/^#\/ranked$/, "ranked", rankedView, "Ranked", "ranked"],
  [/^#\/notifications(?:\/([^/]+))?$/, "notifications", (root, user) => notificationsView(root, user || me()), "Notifications", "notifications"],
  [/^#\/firehose$/, "firehose", firehoseView, "Firehose", null],
  [/^#\/u\/([^/]+)$/, "profile", profileView, "Profile", "profile"],
];

// Nav links to pages this server's groups do not have are left out.
export function hideMissingPages() {
  for (const [, nav, , , role] of ROUTES) {
    const link = document.querySelector(`[data-nav="${nav}"]`);
    if (link && role && !groupOf(role)) link.closest("li").hidden = true;
  }
}

let closeView = () => {};

function showView(view, title, nav) {
  closeView();
  const root = main();
  root.replaceChildren();
  for (const link of document.querySelectorAll("[data-nav]")) {
    if (link.dataset.nav === nav) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  let close = null;
  let closed = false;
  closeView = () => {
    closed = true;
    if (close) close();
  };
  Promise.resolve(view(root)).then((fn) => {
    if (typeof fn !== "function") return;
    if (closed) fn();
    else close = fn;
  });
  document.title = title ? `${title} · tidings` : "tidings";
}

export function route() {
  if (!signedIn()) return signOut();
  const hash = location.hash || "#/home";
  if (hash === "#/profile") {
    location.hash = `#/u/${enc(me())}`;
    return;
  }
  for (const [pattern, nav, view, title, role] of ROUTES) {
    const match = pattern.exec(hash);
    if (!match || (role && !groupOf(role))) continue;
    let args;
    try {
      args = match.slice(1).map((part) => (part === undefined ? undefined : decodeURIComponent(part)));
    } catch {
      location.hash = "#/home"; // a malformed link
      return;
    }
    const own = nav !== "profile" || args[0] === me();
    showView((root) => view(root, ...args), title, own ? nav : null);
    document.getElementById("profile-link").href = `#/u/${enc(me())}`;
    main().focus({ preventScroll: true });
    window.scrollTo({ top: 0 });
    return;
  }
  location.hash = "#/home";
}

// Signed in (by the sign-in page): the session starts, then the page asked for.
export async function begin(values) {
  startSession(values);
  await openSignedIn();
  if (!location.hash || location.hash === "#/sign-in") location.hash = "#/home";
  else route();
}

export function signOut(notice) {
  closeSignedIn();
  endSession();
  forgetAll();
  forgetUsers();
  document.getElementById("top").hidden = true;
  showView((root) => signInView(root, notice, begin), "Sign in");
}
