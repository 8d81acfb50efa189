// <time> elements that keep saying how long ago ("5m") as the page stays open.

import { h } from "./dom.mjs";
import { relativeTime } from "./words.mjs";

export function timeEl(iso) {
  const date = new Date(iso);
  return h(
    "time",
    { datetime: iso, title: date.toLocaleString(), dataset: { relative: "1" } },
    relativeTime(iso),
  );
}

export function startClock() {
  setInterval(() => {
    for (const el of document.querySelectorAll("time[data-relative]")) {
      el.textContent = relativeTime(el.getAttribute("datetime"));
    }
  }, 30_000);
}
