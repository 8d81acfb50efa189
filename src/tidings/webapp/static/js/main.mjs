// The tidings web app: ES modules, no build step, no dependencies.
//
// It is a client of the public HTTP API like any other: every read and write
// goes to /v1 through the JS client (tidings.mjs, the npm package's file)
// with the signed-in user's token. Live updates come over SSE (live.mjs). The server names the feed groups in the page's config; this
// entry point reads it, wires the page's own controls, and shows the route.

import { onUnauthorized } from "./client.mjs";
import { configure, parseConfig } from "./config.mjs";
import { main } from "./dom.mjs";
import { hideMissingPages, route, signOut } from "./router.mjs";
import { restoreSession } from "./session.mjs";
import { openSignedIn } from "./signed-in.mjs";
import { startClock } from "./time.mjs";

configure(parseConfig(document.getElementById("tidings-config")?.textContent));
onUnauthorized(signOut);
hideMissingPages();
startClock();

// j / k move between the cards of the page, as on most feed sites.
document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const target = event.target;
  if (target instanceof HTMLElement && target.closest("input, textarea, select, [contenteditable]")) return;
  if (event.key !== "j" && event.key !== "k") return;
  const cards = [...main().querySelectorAll("article.card")];
  if (!cards.length) return;
  const at = cards.indexOf(document.activeElement);
  const next = event.key === "j" ? Math.min(cards.length - 1, at + 1) : Math.max(0, at - 1);
  cards[next].focus();
  event.preventDefault();
});

window.addEventListener("hashchange", route);
// The skip link moves focus; as a hash it would be taken for a route.
document.querySelector(".skip").addEventListener("click", (event) => {
  event.preventDefault();
  main().focus();
});
document.getElementById("sign-out").addEventListener("click", () => {
  signOut();
  location.hash = "";
});

(async () => {
  if (!restoreSession()) return signOut();
  try {
    await openSignedIn();
  } catch (error) {
    return signOut(`Signed out: ${error.message}`);
  }
  route();
})();
