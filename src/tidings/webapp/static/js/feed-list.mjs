// A feed read page by page as the reader scrolls (an IntersectionObserver on
// the end of the list, and a button for keyboards), with live events: new
// entries go on top while the reader is at the top (a "3 new activities"
// banner says so for a few seconds), and wait behind the banner once they
// have scrolled, so what they read never moves.

import { forget } from "./cards.mjs";
import { alertBox, h } from "./dom.mjs";
import { Live } from "./live.mjs";
import { newActivities } from "./words.mjs";

const PAGE_SIZE = 20;
// How long the banner tells of activities put on top live.
const FRESH_MS = 8000;
// Scrolled less than this, the reader is at the top: live entries go in.
const AT_TOP_PX = 80;

export const atTop = () => window.scrollY < AT_TOP_PX;

export class FeedList {
  // `read(cursor, limit)`: a page; `events(options)`: the live stream (both the client's).
  constructor({ read, events, render, keyOf, label, empty, liveInsert = true }) {
    this.read = read;
    this.render = render;
    this.keyOf = keyOf;
    this.liveInsert = liveInsert;
    this.keys = new Set();
    this.pending = [];
    // Entries put on top live in the last FRESH_MS, while the reader was there.
    this.fresh = 0;
    this.freshTimer = null;
    // Bumped by reload(): a page requested before it is dropped when it lands.
    this.generation = 0;
    this.cursor = null;
    this.done = false;
    this.loading = false;
    this.empty = empty;
    this.list = h("ol", { class: "feed", "aria-label": label, "aria-busy": "false" });
    this.banner = h("button", { type: "button", class: "banner", hidden: true, onclick: () => this.showPending() });
    this.status = h("p", { class: "status muted", role: "status" });
    // What the banner says, told to screen readers (the banner is a button).
    this.announce = h("p", { class: "sr-only", role: "status" });
    this.more = h("button", { type: "button", class: "more quiet", onclick: () => this.next() }, "Load more");
    this.sentinel = h("div", { class: "sentinel" }, this.more);
    this.el = h("div", { class: "feed-wrap" }, this.announce, this.banner, this.list, this.status, this.sentinel);
    this.observer = new IntersectionObserver(
      (entries) => {
        if (entries.some((e) => e.isIntersecting)) this.next();
      },
      { rootMargin: "300px" },
    );
    this.observer.observe(this.sentinel);
    this.live = events ? new Live(events, (type, data) => this.event(type, data)) : null;
    // Marked once the stream is open: what arrives from then on is shown live.
    if (this.live) {
      this.live.ready.then(() => (this.el.dataset.live = "connected"));
      this.live.stopped = () => (this.el.dataset.live = "stopped");
    }
  }

  async next() {
    if (this.loading || this.done) return;
    const generation = this.generation;
    this.loading = true;
    this.list.setAttribute("aria-busy", "true");
    this.status.textContent = "Loading…";
    try {
      const page = await this.read(this.cursor, PAGE_SIZE);
      if (generation !== this.generation) return; // reloaded meanwhile: a stale page
      this.onPage?.(page);
      for (const item of page.results) this.append(item);
      this.cursor = page.next;
      this.done = !page.next;
      this.status.textContent = this.done ? (this.keys.size ? "You're all caught up." : this.empty) : "";
      this.more.hidden = this.done;
    } catch (error) {
      if (generation !== this.generation) return;
      this.status.textContent = "";
      this.status.append(alertBox(this.describe(error)));
      this.done = true;
      this.more.hidden = true;
    } finally {
      this.loading = false;
      this.list.setAttribute("aria-busy", "false");
      if (generation !== this.generation) this.next(); // the reload's first page
    }
  }

  describe(error) {
    return error.message;
  }

  item(value) {
    return h("li", { dataset: { key: this.keyOf(value) } }, this.render(value));
  }

  held(key) {
    return this.list.querySelector(`:scope > li[data-key="${CSS.escape(key)}"]`);
  }

  append(value) {
    const key = this.keyOf(value);
    if (this.keys.has(key)) return; // a page boundary moved under a live insert
    this.keys.add(key);
    this.list.append(this.item(value));
  }

  prepend(value, fresh = true) {
    const key = this.keyOf(value);
    this.held(key)?.remove();
    this.keys.add(key);
    const li = this.item(value);
    if (fresh) li.classList.add("fresh");
    this.list.prepend(li);
    this.status.textContent = this.done && this.keys.size ? "You're all caught up." : this.status.textContent;
  }

  replace(value) {
    this.held(this.keyOf(value))?.replaceWith(this.item(value));
  }

  remove(key) {
    this.held(key)?.remove();
    forget(key);
    this.keys.delete(key);
    this.pending = this.pending.filter((v) => this.keyOf(v) !== key);
    this.paintBanner();
  }

  // A new entry from the live stream.
  arrived(value) {
    const key = this.keyOf(value);
    if (this.keys.has(key)) return;
    const waiting = this.pending.findIndex((v) => this.keyOf(v) === key);
    if (waiting >= 0) {
      this.pending[waiting] = value; // a group changed again while it waited: the newest
      return;
    }
    if (this.liveInsert && atTop() && !this.pending.length) {
      this.prepend(value);
      this.fresh += 1;
      clearTimeout(this.freshTimer);
      this.freshTimer = setTimeout(() => {
        this.fresh = 0;
        this.paintBanner();
      }, FRESH_MS);
    } else {
      this.pending.unshift(value);
    }
    this.paintBanner();
  }

  paintBanner() {
    // Waiting entries, or else those just put on top.
    const n = this.pending.length || this.fresh;
    this.banner.hidden = n === 0;
    this.banner.dataset.mode = this.pending.length ? "waiting" : "shown";
    this.banner.textContent = this.bannerText(n);
    this.announce.textContent = n ? newActivities(n) : "";
  }

  // What the banner button says; the ranked feed adds what clicking does.
  bannerText(n) {
    return newActivities(n);
  }

  showPending() {
    if (!this.liveInsert) return this.reload();
    const values = this.pending.reverse();
    this.pending = [];
    for (const value of values) this.prepend(value);
    this.fresh = 0;
    clearTimeout(this.freshTimer);
    this.paintBanner();
    window.scrollTo({ top: 0 });
    const first = this.list.querySelector("article");
    if (first) first.focus();
  }

  reload() {
    this.generation += 1;
    this.pending = [];
    this.paintBanner();
    this.keys.clear();
    this.list.replaceChildren();
    this.cursor = null;
    this.done = false;
    window.scrollTo({ top: 0 });
    return this.next();
  }

  event(type, data) {
    this.onEvent?.(type, data);
  }

  close() {
    clearTimeout(this.freshTimer);
    this.observer.disconnect();
    if (this.live) this.live.close();
  }
}
