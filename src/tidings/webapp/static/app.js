// The tidings web app: one script, no build step, no dependencies.
//
// It is a client of the public HTTP API like any other: every read and write
// goes to /v1 with the signed-in user's token. Live updates come over SSE,
// read with fetch() rather than EventSource, because EventSource cannot send
// the Authorization header. Pages are views of a hash route (#/home, #/u/bob);
// each view returns a function that closes what it opened (streams, observers).
"use strict";

const CONFIG = JSON.parse(document.getElementById("tidings-config")?.textContent || "{}");
const PAGE_SIZE = 20;
const SESSION_KEY = "tidings.session";
const FIREHOSE_KEPT = 50;
// How long the banner tells of activities put on top live.
const FRESH_MS = 8000;
const MAX_TEXT = 500;
const HOME = "timeline";
const GROUPED = "timeline_aggregated";
const RANKED = "timeline_ranked";
const PROFILE = "user";
const NOTIFICATIONS = "notification";
// Feeds a follow from the profile page connects to the followed user's feed.
const FOLLOWING_FEEDS = [HOME, GROUPED, RANKED];
const enc = encodeURIComponent;

// -- DOM ----------------------------------------------------------------------

// h("a", {href: "#/home", class: "x"}, "text", child): elements without innerHTML,
// so text from activities is never parsed as markup.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
let uniqueCounter = 0;
const uniqueId = (prefix) => `${prefix}-${++uniqueCounter}`;

function toast(message) {
  const box = document.getElementById("toast");
  box.textContent = message;
  box.classList.add("shown");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => box.classList.remove("shown"), 4000);
}

function alertBox(message) {
  return h("p", { class: "notice error", role: "alert" }, message);
}

// -- session and API ----------------------------------------------------------

let session = readSession();
let signedInParts = []; // closers of what lives while signed in (the badge's stream)

function readSession() {
  try {
    const value = JSON.parse(sessionStorage.getItem(SESSION_KEY) || "null");
    return value && typeof value.token === "string" && typeof value.user === "string" ? value : null;
  } catch {
    return null;
  }
}

class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

// {status, data} of a call to the API with the session's token (or `token`).
async function request(method, path, body, token) {
  const headers = { Authorization: `Bearer ${token || session.token}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  if (response.status !== 204) data = await response.json().catch(() => null);
  if (!response.ok) {
    const detail = (data && data.detail) || `${response.status} ${response.statusText}`;
    if (response.status === 401 && !token) signOut(`Signed out: ${detail}`);
    throw new ApiError(response.status, detail);
  }
  return { status: response.status, data };
}

async function api(method, path, body) {
  return (await request(method, path, body)).data;
}

// A feed's (or the firehose's) server-sent events, read with fetch so the
// token goes in a header. Reconnects with Last-Event-ID, backing off; stops on
// 400/401/403, which retrying would not change.
class Live {
  constructor(path, onEvent, onError) {
    this.path = path;
    this.onEvent = onEvent;
    this.onError = onError || (() => {});
    this.lastId = null;
    this.closed = false;
    this.controller = null;
    this.ready = new Promise((resolve) => (this.opened = resolve));
    this.run();
  }

  async run() {
    let delay = 500;
    while (!this.closed) {
      this.controller = new AbortController();
      try {
        const headers = { Authorization: `Bearer ${session.token}`, Accept: "text/event-stream" };
        if (this.lastId) headers["Last-Event-ID"] = this.lastId;
        const response = await fetch(this.path, {
          headers,
          signal: this.controller.signal,
          cache: "no-store",
        });
        if (!response.ok) {
          const data = await response.json().catch(() => null);
          const error = new ApiError(response.status, (data && data.detail) || response.statusText);
          this.onError(error);
          if (response.status === 401) {
            this.stopped?.();
            signOut(`Signed out: ${error.message}`);
            return;
          }
          if ([400, 403, 404, 422].includes(response.status)) return;
          throw error;
        }
        delay = 500;
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            this.frame(buffer.slice(0, end));
            buffer = buffer.slice(end + 2);
          }
        }
      } catch {
        if (this.closed) return;
      }
      await sleep(delay);
      delay = Math.min(delay * 2, 10_000);
    }
  }

  frame(text) {
    let type = "message";
    let id = null;
    const data = [];
    for (const line of text.split("\n")) {
      if (line.startsWith(":")) {
        if (line.startsWith(": connected")) this.opened();
        continue;
      }
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") type = value;
      else if (field === "id") id = value;
      else if (field === "data") data.push(value);
    }
    if (!data.length) return;
    if (id) this.lastId = id;
    let parsed;
    try {
      parsed = JSON.parse(data.join("\n"));
    } catch {
      return;
    }
    this.onEvent(type, parsed);
  }

  close() {
    this.closed = true;
    if (this.controller) this.controller.abort();
  }
}

// -- words ----------------------------------------------------------------------

const PAST = {
  post: "posted",
  like: "liked",
  comment: "commented on",
  share: "shared",
  follow: "followed",
  mention: "mentioned",
};

function pastTense(verb) {
  if (PAST[verb]) return PAST[verb];
  if (verb.endsWith("e")) return `${verb}d`;
  return `${verb}ed`;
}

function refKind(ref) {
  if (ref && typeof ref === "object") return ref.type || "item";
  const text = String(ref || "");
  const colon = text.indexOf(":");
  return colon > 0 ? text.slice(0, colon) : "item";
}

function plural(word, count) {
  if (count === 1) return word;
  if (word === "person") return "people";
  if (/[^aeiou]y$/.test(word)) return `${word.slice(0, -1)}ies`;
  if (/(s|x|ch|sh)$/.test(word)) return `${word}es`;
  return `${word}s`;
}

const article = (word) => (/^[aeiou]/.test(word) ? `an ${word}` : `a ${word}`);

function relativeTime(iso) {
  const then = new Date(iso).getTime();
  const seconds = Math.max(0, (Date.now() - then) / 1000);
  if (seconds < 45) return "now";
  if (seconds < 3600) return `${Math.round(seconds / 60)}m`;
  if (seconds < 86_400) return `${Math.round(seconds / 3600)}h`;
  if (seconds < 7 * 86_400) return `${Math.round(seconds / 86_400)}d`;
  return new Date(iso).toLocaleDateString(undefined, { month: "short", day: "numeric" });
}

function timeEl(iso) {
  const date = new Date(iso);
  return h(
    "time",
    { datetime: iso, title: date.toLocaleString(), dataset: { relative: "1" } },
    relativeTime(iso),
  );
}

setInterval(() => {
  for (const el of document.querySelectorAll("time[data-relative]")) {
    el.textContent = relativeTime(el.getAttribute("datetime"));
  }
}, 30_000);

// -- users --------------------------------------------------------------------

// An activity's actor as a user: enriched reads give {id, handle, profile};
// a plain id (an actor no user was created for) stands for itself.
function userOf(actor) {
  if (actor && typeof actor === "object") return actor;
  const id = String(actor);
  return { id, handle: id, profile: {} };
}

const nameOf = (user) => (user.deleted ? "deleted user" : user.profile?.name || user.handle || user.id);

function avatarSrc(user) {
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

function avatar(user, size = 40) {
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

const USER_CACHE_SIZE = 1000;

function lookUpUser(id) {
  if (!userCache.has(id)) {
    if (userCache.size >= USER_CACHE_SIZE) userCache.clear();
    userCache.set(
      id,
      api("GET", `/v1/users/${enc(id)}`).catch(() => null),
    );
  }
  return userCache.get(id);
}

// A user known by id only (an unenriched actor): worth looking up.
function isBare(user) {
  return Boolean(session) && !user.deleted && user.handle === user.id && !Object.keys(user.profile || {}).length;
}

function userLink(user) {
  const link = h("a", { class: "name", href: `#/u/${enc(user.id)}` }, nameOf(user));
  if (isBare(user)) {
    lookUpUser(user.id).then((found) => {
      if (found) link.textContent = nameOf(found);
    });
  }
  return link;
}

// -- activities ---------------------------------------------------------------

// What the page knows of each activity shown: counts and the reader's own
// reactions, shared by every card of it (a card may be on the page twice).
const known = new Map();

function remember(activity) {
  const held = known.get(activity.id);
  const entry = held || { activity, counts: {}, own: {}, reported: new Set() };
  entry.activity = activity;
  // Counts a read brings are exact; an event's activity comes without them.
  if (activity.reaction_counts) entry.counts = { ...activity.reaction_counts };
  if (activity.own_reactions) entry.own = { ...activity.own_reactions };
  known.set(activity.id, entry);
  return entry;
}

// Every card of an activity on the page (it may show in more than one place).
function cardsOf(activityId) {
  return document.querySelectorAll(`article.card[data-id="${CSS.escape(activityId)}"]`);
}

// Drop what the page knows of an activity no card shows any more.
function forget(activityId) {
  if (activityId && !cardsOf(activityId).length) {
    known.delete(activityId);
  }
}

function bodyText(activity) {
  const extra = activity.extra || {};
  for (const key of ["text", "caption", "title"]) {
    if (typeof extra[key] === "string" && extra[key]) return extra[key];
  }
  return null;
}

// What an activity is about: a comment's target (the post commented on),
// unless that is an activity (a reaction's notification names the activity
// as target and its object as object); else its object.
function subjectOf(activity) {
  const target = activity.target;
  const about = typeof target === "string" ? target : target && target.id;
  if (activity.verb === "comment" && about && !String(about).startsWith("activity:")) return target;
  return activity.object;
}

function describe(activity) {
  const subject = subjectOf(activity);
  if (subject && typeof subject === "object" && subject.data && typeof subject.data.name === "string") {
    return `${pastTense(activity.verb)} ${subject.data.name}`;
  }
  return `${pastTense(activity.verb)} ${article(refKind(subject))}`;
}

function notifyTargets(activity) {
  const author = userOf(activity.actor).id;
  return author === session.user ? [] : [`${NOTIFICATIONS}:${author}`];
}

function activityCard(activity, options = {}) {
  const entry = remember(activity);
  const user = userOf(activity.actor);
  const headId = uniqueId("head");
  const text = bodyText(activity);
  const commentsId = uniqueId("comments");
  const likeButton = h(
    "button",
    { type: "button", class: "like", "aria-pressed": "false", onclick: () => toggleLike(activity.id) },
    h("span", { "aria-hidden": "true" }, "♥ "),
    "Like ",
    h("span", { class: "count" }, "0"),
  );
  const commentButton = h(
    "button",
    {
      type: "button",
      class: "comment-toggle",
      "aria-expanded": "false",
      "aria-controls": commentsId,
      onclick: (event) => toggleComments(event.currentTarget.closest("article"), activity),
    },
    "Comment ",
    h("span", { class: "count" }, "0"),
  );
  const card = h(
    "article",
    { class: "card", dataset: { id: activity.id }, tabindex: "0", "aria-labelledby": headId },
    avatar(user),
    h(
      "div",
      { class: "body" },
      h(
        "p",
        { class: "head", id: headId },
        userLink(user),
        " ",
        h("span", { class: "handle" }, `@${user.handle || user.id}`),
        " ",
        h("span", { class: "verb" }, describe(activity)),
        " · ",
        timeEl(activity.time),
      ),
      text ? h("p", { class: "text" }, text) : null,
      options.score ? scoreBadge(activity) : null,
      // The firehose shows activities as published: no counts come with
      // them, nor reaction events after.
      options.actions === false ? null : h("div", { class: "actions" }, likeButton, commentButton),
      options.actions === false
        ? null
        : h(
            "section",
            { class: "comments", id: commentsId, hidden: true, "aria-label": "Comments" },
            h("ol", { class: "comment-list" }),
            commentForm(activity),
          ),
    ),
  );
  if (options.actions !== false) paintReactions(card, entry);
  if (isBare(user)) {
    lookUpUser(user.id).then((found) => {
      if (found) card.querySelector(".head .handle").textContent = `@${found.handle}`;
    });
  }
  return card;
}

function scoreBadge(activity) {
  const tipId = uniqueId("explain");
  const rows = Object.entries(activity.explain || {}).map(([name, value]) =>
    h("tr", {}, h("th", { scope: "row" }, name), h("td", {}, formatNumber(value))),
  );
  return h(
    "div",
    { class: "score-wrap" },
    h(
      "button",
      { type: "button", class: "score", "aria-describedby": tipId },
      `score ${formatNumber(activity.score)}`,
    ),
    h(
      "div",
      { class: "tip", role: "tooltip", id: tipId },
      h("p", {}, "Why it ranks here"),
      h("table", {}, h("tbody", {}, rows)),
    ),
  );
}

function formatNumber(value) {
  if (typeof value !== "number") return String(value);
  if (Number.isInteger(value)) return String(value);
  return value.toFixed(Math.abs(value) < 10 ? 3 : 1);
}

function paintReactions(card, entry) {
  const likes = entry.counts.like || 0;
  const comments = entry.counts.comment || 0;
  const liked = Boolean(entry.own.like && entry.own.like.length);
  const like = card.querySelector(":scope > .body > .actions .like");
  like.setAttribute("aria-pressed", String(liked));
  like.querySelector(".count").textContent = String(likes);
  like.setAttribute("aria-label", `Like (${likes} ${plural("like", likes)}${liked ? ", liked by you" : ""})`);
  const comment = card.querySelector(":scope > .body > .actions .comment-toggle");
  comment.querySelector(".count").textContent = String(comments);
  comment.setAttribute("aria-label", `Comments (${comments})`);
}

function repaint(activityId) {
  const entry = known.get(activityId);
  if (!entry) return;
  for (const card of cardsOf(activityId)) {
    paintReactions(card, entry);
  }
}

// A reaction event carries the activity's exact counts after it: they win
// over what the page guessed, and the reaction is noted so that the answer
// to the page's own request does not count it a second time.
function reactionEvent(type, data) {
  const entry = known.get(data.activity_id);
  if (!entry || data.parent) return;
  entry.counts = { ...(data.reaction_counts || {}) };
  entry.reported.add(type === "reaction.added" ? data.id : `-${data.id}`);
  if (data.user === session.user) {
    const own = (entry.own[data.kind] || []).filter((r) => r.id !== data.id);
    entry.own[data.kind] = type === "reaction.added" ? [data, ...own] : own;
  }
  repaint(data.activity_id);
  if (data.kind === "comment" && type === "reaction.added") appendComment(data.activity_id, data);
}

async function toggleLike(activityId) {
  const entry = known.get(activityId);
  const mine = entry.own.like && entry.own.like[0];
  try {
    if (mine) {
      await api("DELETE", `/v1/reactions/${enc(mine.id)}`);
      entry.own.like = [];
      if (!entry.reported.has(`-${mine.id}`)) entry.counts.like = Math.max(0, (entry.counts.like || 1) - 1);
    } else {
      const { status, data } = await request("POST", `/v1/activities/${enc(activityId)}/reactions`, {
        kind: "like",
        user: session.user,
        to: notifyTargets(entry.activity),
      });
      entry.own.like = [data];
      if (status === 201 && !entry.reported.has(data.id)) entry.counts.like = (entry.counts.like || 0) + 1;
    }
  } catch (error) {
    toast(`Could not change the like: ${error.message}`);
  }
  repaint(activityId);
}

function commentForm(activity) {
  const inputId = uniqueId("comment");
  const input = h("input", { id: inputId, name: "text", maxlength: MAX_TEXT, required: true, autocomplete: "off" });
  return h(
    "form",
    {
      class: "comment-form",
      onsubmit: async (event) => {
        event.preventDefault();
        const text = input.value.trim();
        if (!text) return;
        input.disabled = true;
        try {
          const { data } = await request("POST", `/v1/activities/${enc(activity.id)}/reactions`, {
            kind: "comment",
            user: session.user,
            data: { text },
            to: notifyTargets(activity),
          });
          const entry = known.get(activity.id);
          if (!entry.reported.has(data.id)) entry.counts.comment = (entry.counts.comment || 0) + 1;
          appendComment(activity.id, data);
          repaint(activity.id);
          input.value = "";
        } catch (error) {
          toast(`Could not comment: ${error.message}`);
        } finally {
          input.disabled = false;
          input.focus();
        }
      },
    },
    h("label", { for: inputId }, "Your comment"),
    input,
    h("button", { type: "submit" }, "Reply"),
  );
}

function commentItem(reaction) {
  const user = userOf(reaction.user);
  return h(
    "li",
    { dataset: { reaction: reaction.id } },
    userLink(user),
    " ",
    h("span", {}, (reaction.data && reaction.data.text) || ""),
    " · ",
    timeEl(reaction.created_at),
  );
}

function appendComment(activityId, reaction) {
  for (const card of cardsOf(activityId)) {
    const list = card.querySelector(".comment-list");
    const section = card.querySelector(".comments");
    if (section.hidden || list.querySelector(`[data-reaction="${CSS.escape(reaction.id)}"]`)) continue;
    list.prepend(commentItem(reaction));
  }
}

async function toggleComments(card, activity) {
  const section = card.querySelector(".comments");
  const button = card.querySelector(".comment-toggle");
  const open = section.hidden;
  section.hidden = !open;
  button.setAttribute("aria-expanded", String(open));
  if (!open) return;
  const list = section.querySelector(".comment-list");
  list.replaceChildren(h("li", { class: "muted" }, "Loading comments…"));
  try {
    const page = await api("GET", `/v1/activities/${enc(activity.id)}/reactions?kind=comment&limit=10`);
    list.replaceChildren(...page.results.map(commentItem));
    if (!page.results.length) list.replaceChildren(h("li", { class: "muted" }, "No comments yet."));
  } catch (error) {
    list.replaceChildren(h("li", { class: "error" }, `Could not load comments: ${error.message}`));
  }
  section.querySelector("input").focus();
}

// -- groups ("bob and 2 others liked 3 photos") ---------------------------------

function groupSentence(group, { notification }) {
  const activities = group.activities || [];
  const actors = [];
  for (const activity of activities) {
    const user = userOf(activity.actor);
    if (!actors.some((a) => a.id === user.id)) actors.push(user);
  }
  const who = [];
  const people = Math.max(group.actor_count || 0, actors.length);
  if (actors.length) who.push(userLink(actors[0]));
  if (people === 2 && actors[1]) who.push(" and ", userLink(actors[1]));
  else if (people >= 2) who.push(` and ${people - 1} ${people === 2 ? "other" : "others"}`);
  const newest = activities[0] || { verb: group.verb, object: "" };
  const kind = refKind(subjectOf(newest));
  const subjects = new Set(activities.map((a) => String(subjectOf(a))));
  const count = group.activity_count;
  // One thing acted on ("liked your photo") or several ("liked 3 photos").
  const one = count === 1 || subjects.size === 1;
  const what = one ? (notification ? `your ${kind}` : article(kind)) : `${count} ${plural(kind, count)}`;
  if (newest.verb === "post") {
    if (notification) return [...who, ` mentioned you in ${article(kind)}`];
    return [...who, ` posted ${count === 1 ? article(kind) : `${count} ${plural(kind, count)}`}`];
  }
  return [...who, ` ${pastTense(newest.verb)} ${what}`];
}

function groupCard(group, options = {}) {
  const activities = group.activities || [];
  const actors = [];
  for (const activity of activities) {
    const user = userOf(activity.actor);
    if (!actors.some((a) => a.id === user.id)) actors.push(user);
  }
  const headId = uniqueId("group");
  const unread = options.notification && group.is_read === false;
  const texts = activities.map(bodyText).filter(Boolean).slice(0, 3);
  return h(
    "article",
    {
      class: `card group${unread ? " unread" : ""}`,
      dataset: { group: group.group },
      tabindex: "0",
      "aria-labelledby": headId,
    },
    h("div", { class: "stack" }, actors.slice(0, 3).map((user) => avatar(user, 32))),
    h(
      "div",
      { class: "body" },
      h(
        "p",
        { class: "head", id: headId },
        unread ? h("span", { class: "sr-only unread-mark" }, "Unread: ") : null,
        groupSentence(group, options),
        " · ",
        timeEl(group.updated_at),
      ),
      texts.length ? h("ul", { class: "snippets" }, texts.map((text) => h("li", {}, text))) : null,
    ),
  );
}

// -- lists with cursors, live updates and infinite scroll -------------------------

// A feed read page by page as the reader scrolls (an IntersectionObserver on
// the end of the list, and a button for keyboards), with live events: new
// entries go on top while the reader is at the top (a "3 new activities"
// banner says so for a few seconds), and wait behind the banner once they
// have scrolled, so what they read never moves.
class FeedList {
  constructor({ path, events, render, keyOf, label, empty, liveInsert = true }) {
    this.path = path;
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
      const sep = this.path.includes("?") ? "&" : "?";
      const cursor = this.cursor ? `&cursor=${enc(this.cursor)}` : "";
      const page = await api("GET", `${this.path}${sep}limit=${PAGE_SIZE}${cursor}`);
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

  append(value) {
    const key = this.keyOf(value);
    if (this.keys.has(key)) return; // a page boundary moved under a live insert
    this.keys.add(key);
    this.list.append(this.item(value));
  }

  prepend(value, fresh = true) {
    const key = this.keyOf(value);
    const held = this.list.querySelector(`:scope > li[data-key="${CSS.escape(key)}"]`);
    if (held) held.remove();
    this.keys.add(key);
    const li = this.item(value);
    if (fresh) li.classList.add("fresh");
    this.list.prepend(li);
    this.status.textContent = this.done && this.keys.size ? "You're all caught up." : this.status.textContent;
  }

  replace(value) {
    const key = this.keyOf(value);
    const held = this.list.querySelector(`:scope > li[data-key="${CSS.escape(key)}"]`);
    if (held) held.replaceWith(this.item(value));
  }

  remove(key) {
    const held = this.list.querySelector(`:scope > li[data-key="${CSS.escape(key)}"]`);
    if (held) held.remove();
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
    if (this.liveInsert && window.scrollY < 80 && !this.pending.length) {
      this.prepend(value);
      this.fresh += 1;
      clearTimeout(this.freshTimer);
      this.freshTimer = setTimeout(() => {
        this.fresh = 0;
        this.paintBanner();
      }, FRESH_MS);
      this.paintBanner();
    } else {
      this.pending.unshift(value);
      this.paintBanner();
    }
  }

  paintBanner() {
    // Waiting entries, or else those just put on top.
    const n = this.pending.length || this.fresh;
    this.banner.hidden = n === 0;
    this.banner.dataset.mode = this.pending.length ? "waiting" : "shown";
    this.banner.textContent = n === 1 ? "1 new activity" : `${n} new activities`;
    this.announce.textContent = n ? this.banner.textContent : "";
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

// Flat feeds: activities; live activity and reaction events.
function activityList({ feed, query = "", label, empty, score = false, liveInsert = true }) {
  const [group, key] = splitFeed(feed);
  const base = `/v1/feeds/${enc(group)}/${enc(key)}`;
  const list = new FeedList({
    path: `${base}?enrich=true&reactions=counts,own${query}`,
    events: `${base}/events?enrich=true`,
    render: (activity) => activityCard(activity, { score }),
    keyOf: (activity) => activity.id,
    label,
    empty,
    liveInsert,
  });
  list.onEvent = (type, data) => {
    if (type === "activity.added") list.arrived(data);
    else if (type === "activity.removed") list.remove(data.id);
    else if (type === "activity.updated") {
      // The event carries the activity, not its reactions: keep what the page knows.
      const { reaction_counts: _c, own_reactions: _o, ...held } = known.get(data.id)?.activity || {};
      list.replace({ ...held, ...data });
    }
    else if (type === "reaction.added" || type === "reaction.removed") reactionEvent(type, data);
    else if (type === "resync") list.reload();
  };
  return list;
}

// Aggregated and notification feeds: groups; a changed group moves to the top.
function groupList({ feed, label, empty, notification = false }) {
  const [group, key] = splitFeed(feed);
  const base = `/v1/feeds/${enc(group)}/${enc(key)}`;
  const list = new FeedList({
    path: `${base}?enrich=true`,
    events: `${base}/events?enrich=true`,
    render: (value) => groupCard(value, { notification }),
    keyOf: (value) => value.group,
    label,
    empty,
  });
  list.onEvent = (type, data) => {
    if (type === "group.updated") {
      if (data.removed) list.remove(data.group);
      else if (list.keys.has(data.group) && window.scrollY < 80) list.prepend(data);
      else if (list.keys.has(data.group)) list.replace(data);
      else list.arrived(data);
    } else if (type === "resync") list.reload();
  };
  return list;
}

function splitFeed(feed) {
  const colon = feed.indexOf(":");
  return [feed.slice(0, colon), feed.slice(colon + 1)];
}

// -- views ----------------------------------------------------------------------

const main = () => document.getElementById("main");

function heading(text) {
  return h("h1", {}, text);
}

function homeView(root) {
  const list = activityList({
    feed: `${HOME}:${session.user}`,
    label: "Home timeline",
    empty: "Nothing here yet: follow people from their profiles, or post something.",
  });
  root.append(heading("Home"), composer(list), list.el);
  list.next();
  return () => list.close();
}

function composer(list) {
  const textId = uniqueId("compose");
  const counter = h("span", { class: "muted counter", "aria-live": "polite" }, `0 / ${MAX_TEXT}`);
  const text = h("textarea", { id: textId, name: "text", rows: "3", maxlength: MAX_TEXT, required: true });
  text.addEventListener("input", () => (counter.textContent = `${text.value.length} / ${MAX_TEXT}`));
  text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
  const button = h("button", { type: "submit", class: "primary" }, "Post");
  const form = h(
    "form",
    {
      class: "composer",
      id: "composer",
      onsubmit: async (event) => {
        event.preventDefault();
        const value = text.value.trim();
        if (!value) return;
        button.disabled = true;
        try {
          const id = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
          const activity = await api("POST", `/v1/feeds/${PROFILE}/${enc(session.user)}/activities`, {
            actor: session.user,
            verb: "post",
            object: `status:${session.user}-${id}`,
            extra: { text: value },
          });
          // Only what was sent: text typed while it was on its way stays.
          if (text.value.trim() === value) {
            text.value = "";
            counter.textContent = `0 / ${MAX_TEXT}`;
          }
          activity.actor = session.profile || activity.actor;
          activity.reaction_counts = {};
          activity.own_reactions = {};
          list.prepend(activity);
        } catch (error) {
          toast(`Could not post: ${error.message}`);
        } finally {
          button.disabled = false;
          text.focus();
        }
      },
    },
    h("label", { for: textId }, "What's happening?"),
    text,
    h("div", { class: "row" }, counter, button),
  );
  return form;
}

function aggregatedView(root) {
  const list = groupList({
    feed: `${GROUPED}:${session.user}`,
    label: "Grouped timeline",
    empty: "Nothing here yet: follow people from their profiles.",
  });
  root.append(
    heading("Grouped"),
    h("p", { class: "muted" }, "Your timeline, grouped by who did what on which day."),
    list.el,
  );
  list.next();
  return () => list.close();
}

function rankedView(root) {
  const list = activityList({
    feed: `${RANKED}:${session.user}`,
    query: "&explain=true",
    label: "Ranked timeline",
    empty: "Nothing to rank yet: follow people from their profiles.",
    score: true,
    liveInsert: false, // a new activity's place depends on its score: re-rank to see it
  });
  list.banner.title = "Rank the timeline again";
  const paint = list.paintBanner.bind(list);
  list.paintBanner = () => {
    paint();
    const n = list.pending.length;
    list.banner.textContent = `${n === 1 ? "1 new activity" : `${n} new activities`}: rank again`;
  };
  list.onPage = (page) => {
    if (page.renewed) toast("The ranking was renewed; the pages before were ranked afresh.");
  };
  root.append(
    heading("Ranked"),
    h("p", { class: "muted" }, "Your timeline ordered by the ranking; hover or focus a score for why."),
    list.el,
  );
  list.next();
  return () => list.close();
}

function notificationsView(root, user = session.user) {
  const mine = user === session.user;
  root.append(heading(mine ? "Notifications" : `${user}'s notifications`));
  const list = groupList({
    feed: `${NOTIFICATIONS}:${user}`,
    label: "Notifications",
    empty: "No notifications yet.",
    notification: true,
  });
  list.describe = (error) =>
    error.status === 403
      ? `You can't see ${user}'s notifications: only ${user} can. (The server answered 403: ${error.message})`
      : error.message;
  if (mine) {
    const button = h(
      "button",
      {
        type: "button",
        id: "mark-read",
        onclick: async () => {
          button.disabled = true;
          try {
            const counts = await api("POST", `/v1/feeds/${NOTIFICATIONS}/${enc(user)}/read`, { all: true });
            setBadge(counts.unseen);
            for (const card of list.list.querySelectorAll("article.unread")) {
              card.classList.remove("unread");
              card.querySelector(".unread-mark")?.remove();
            }
            toast("All notifications marked read.");
          } catch (error) {
            toast(`Could not mark them read: ${error.message}`);
          } finally {
            button.disabled = false;
          }
        },
      },
      "Mark all read",
    );
    root.append(h("div", { class: "toolbar" }, button));
  }
  root.append(list.el);
  list.next();
  return () => list.close();
}

function firehoseView(root) {
  const inputId = uniqueId("track");
  const input = h("input", {
    id: inputId,
    name: "track",
    placeholder: "harbour, coffee",
    maxlength: "400",
    autocomplete: "off",
    "aria-describedby": "track-help",
  });
  const status = h("p", { class: "status muted", role: "status" }, "Not listening.");
  const list = h("ol", { class: "feed", "aria-label": "Firehose" });
  const counter = h("p", { class: "sr-only", role: "status" });
  let seen = 0;
  let live = null;
  const start = () => {
    if (live) live.close();
    list.replaceChildren();
    delete list.dataset.live;
    seen = 0;
    const track = input.value.trim();
    const query = track ? `?track=${enc(track)}` : "";
    status.textContent = track ? `Listening for ${track}…` : "Listening to everything…";
    live = new Live(
      `/v1/firehose${query}`,
      (type, data) => {
        if (type === "activity.added") {
          list.prepend(h("li", {}, activityCard(data, { actions: false })));
          while (list.children.length > FIREHOSE_KEPT) {
            forget(list.lastElementChild.querySelector("article")?.dataset.id);
            list.lastElementChild.remove();
          }
          seen += 1;
          counter.textContent = `${seen} matching ${plural("activity", seen)}`;
        } else if (type === "delete") {
          for (const card of list.querySelectorAll(`article[data-id="${CSS.escape(data.id)}"]`)) {
            card.closest("li").remove();
          }
        } else if (type === "limit") {
          status.textContent = `Listening; ${data.missed ?? "some"} activities were skipped while this page fell behind.`;
        }
      },
      (error) => {
        status.textContent = "";
        status.append(alertBox(`The firehose refused: ${error.message}`));
      },
    );
    const opened = live;
    opened.ready.then(() => {
      if (!opened.closed) list.dataset.live = "connected";
    });
  };
  root.append(
    heading("Firehose"),
    h(
      "form",
      {
        class: "track",
        onsubmit: (event) => {
          event.preventDefault();
          start();
        },
      },
      h("label", { for: inputId }, "Track"),
      input,
      h("button", { type: "submit", class: "primary" }, "Listen"),
      h(
        "p",
        { id: "track-help", class: "muted" },
        "Words or phrases, comma-separated: every activity published from now on that mentions one of them appears here. Empty: everything.",
      ),
    ),
    status,
    counter,
    list,
  );
  return () => live && live.close();
}

async function profileView(root, userId) {
  const me = userId === session.user;
  const card = h("section", { class: "profile", "aria-label": "Profile" }, h("p", { class: "muted" }, "Loading profile…"));
  const list = activityList({
    feed: `${PROFILE}:${userId}`,
    label: `Activities of ${userId}`,
    empty: "No activities yet.",
  });
  root.append(card, h("h2", {}, "Activity"), list.el);
  list.next();
  const paint = async () => {
    let user;
    try {
      user = await api("GET", `/v1/users/${enc(userId)}`);
    } catch (error) {
      if (error.status !== 404) {
        card.replaceChildren(alertBox(error.message));
        return;
      }
      user = { id: userId, handle: userId, profile: {}, counts: null };
    }
    const counts = user.counts || {};
    const following = followingSources.has(`${PROFILE}:${userId}`);
    const muted = mutedUsers.has(userId);
    card.replaceChildren(
      avatar(user, 96),
      h(
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
        me
          ? h("p", {}, h("a", { href: "#/notifications" }, "Your notifications"))
          : h(
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
                {
                  type: "button",
                  id: "mute",
                  onclick: (event) => mute(event.currentTarget, user, !muted).then(paint),
                },
                muted ? "Unmute" : "Mute",
              ),
            ),
      ),
    );
  };
  await paint();
  return () => list.close();
}

function countItem(name, value) {
  const shown = typeof value === "number" ? value.toLocaleString("en-US") : "–";
  return h("div", { dataset: { count: name } }, h("dt", {}, name), h("dd", {}, shown));
}

async function follow(button, user, on) {
  button.disabled = true;
  const source = `${PROFILE}:${user.id}`;
  try {
    if (on) {
      await api("POST", "/v1/follows:batch", {
        follows: FOLLOWING_FEEDS.map((group) => ({ follower: `${group}:${session.user}`, source })),
      });
      followingSources.add(source);
      toast(`Following @${user.handle}.`);
    } else {
      for (const group of FOLLOWING_FEEDS) {
        await request("DELETE", `/v1/feeds/${group}/${enc(session.user)}/follows/${enc(source)}`).catch(
          (error) => {
            if (error.status !== 404) throw error;
          },
        );
      }
      followingSources.delete(source);
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
      await api("POST", `/v1/users/${enc(session.user)}/mutes`, { target: user.id });
      mutedUsers.add(user.id);
      toast(`Muted @${user.handle}: their activities are hidden from your feeds.`);
    } else {
      await api("DELETE", `/v1/users/${enc(session.user)}/mutes/${enc(user.id)}`);
      mutedUsers.delete(user.id);
      toast(`Unmuted @${user.handle}.`);
    }
  } catch (error) {
    toast(`Could not ${on ? "mute" : "unmute"}: ${error.message}`);
  }
}

// -- signing in ------------------------------------------------------------------

let followingSources = new Set();
let mutedUsers = new Set();

function signInView(root, notice) {
  root.append(heading("Sign in"));
  if (notice) root.append(alertBox(notice));
  const error = h("div", { role: "alert", class: "sign-in-error" });
  if (CONFIG.devSignIn) {
    root.append(
      h("p", {}, "This is a development server: pick a demo user to act as. (A production server never mints tokens like this.)"),
      h(
        "ul",
        { class: "people" },
        (CONFIG.users || []).map((user) =>
          h(
            "li",
            {},
            h(
              "button",
              { type: "button", class: "person", dataset: { user: user.id }, onclick: () => devSignIn(user.id, error) },
              avatar({ id: user.id, profile: {} }, 40),
              h("span", {}, h("strong", {}, user.name), h("span", { class: "handle" }, ` @${user.handle} · ${user.id}`)),
            ),
          ),
        ),
      ),
    );
    const inputId = uniqueId("user");
    const input = h("input", { id: inputId, name: "user", required: true, autocomplete: "username" });
    root.append(
      h(
        "form",
        {
          class: "inline",
          onsubmit: (event) => {
            event.preventDefault();
            devSignIn(input.value.trim(), error);
          },
        },
        h("label", { for: inputId }, "Or any user id"),
        input,
        h("button", { type: "submit", class: "primary" }, "Sign in"),
      ),
    );
  } else {
    const inputId = uniqueId("token");
    const input = h("textarea", { id: inputId, name: "token", rows: "4", required: true, spellcheck: "false" });
    root.append(
      h("p", {}, "Paste a user token your application minted for you (", h("code", {}, "tidings token USER"), ")."),
      h(
        "form",
        {
          onsubmit: async (event) => {
            event.preventDefault();
            await tokenSignIn(input.value.trim(), error);
          },
        },
        h("label", { for: inputId }, "Token"),
        input,
        h("button", { type: "submit", class: "primary" }, "Sign in"),
      ),
    );
  }
  root.append(error);
  return () => {};
}

async function devSignIn(user, errorBox) {
  errorBox.textContent = "";
  try {
    const response = await fetch("/app/session", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ user }),
    });
    const data = await response.json();
    if (!response.ok) throw new ApiError(response.status, data.detail);
    await begin({ user: data.user, token: data.token });
  } catch (error) {
    errorBox.textContent = `Could not sign in: ${error.message}`;
  }
}

async function tokenSignIn(token, errorBox) {
  errorBox.textContent = "";
  try {
    const { data } = await request("GET", "/app/session", undefined, token);
    if (data.server) throw new ApiError(400, "that is a server token; sign in with a user token");
    await begin({ user: data.user, token });
  } catch (error) {
    errorBox.textContent = `Could not sign in: ${error.message}`;
  }
}

async function begin(values) {
  session = values;
  sessionStorage.setItem(SESSION_KEY, JSON.stringify(session));
  await startSession();
  if (!location.hash || location.hash === "#/sign-in") location.hash = "#/home";
  else route();
}

// What the signed-in user's pages share: their profile, the feeds they
// follow, who they mute, and the notification badge with its live stream.
async function startSession() {
  for (const close of signedInParts) close();
  signedInParts = [];
  const me = await request("GET", `/v1/users/${enc(session.user)}`).then(
    (r) => r.data,
    () => ({ id: session.user, handle: session.user, profile: {} }),
  );
  session.profile = { id: me.id, handle: me.handle, profile: me.profile };
  followingSources = new Set();
  let cursor = null;
  do {
    const page = await api(
      "GET",
      `/v1/feeds/${HOME}/${enc(session.user)}/following?limit=100${cursor ? `&cursor=${enc(cursor)}` : ""}`,
    );
    for (const row of page.results) followingSources.add(row.source);
    cursor = page.next;
  } while (cursor);
  // Your own posts belong in your timelines (counts leave this follow out).
  const own = `${PROFILE}:${session.user}`;
  if (!followingSources.has(own)) {
    await api("POST", "/v1/follows:batch", {
      follows: FOLLOWING_FEEDS.map((group) => ({ follower: `${group}:${session.user}`, source: own })),
    });
    followingSources.add(own);
  }
  mutedUsers = new Set(((await api("GET", `/v1/users/${enc(session.user)}/mutes`)).results || []).map((m) => m.target));
  document.getElementById("top").hidden = false;
  const name = document.getElementById("me-name");
  name.replaceChildren(avatar(session.profile, 28), " ", h("span", {}, `@${session.profile.handle}`));
  const feed = `/v1/feeds/${NOTIFICATIONS}/${enc(session.user)}`;
  const live = new Live(`${feed}/events`, (type, data) => {
    if (type === "counts.changed") setBadge(data.unseen);
  });
  signedInParts.push(() => live.close());
  const first = await api("GET", `${feed}?limit=1`);
  setBadge(first.unseen || 0);
}

function setBadge(unseen) {
  const badge = document.getElementById("badge");
  document.getElementById("badge-count").textContent = String(unseen);
  badge.hidden = !unseen;
  document.title = unseen ? `(${unseen}) tidings` : "tidings";
}

function signOut(notice) {
  for (const close of signedInParts) close();
  signedInParts = [];
  session = null;
  known.clear();
  userCache.clear();
  sessionStorage.removeItem(SESSION_KEY);
  document.getElementById("top").hidden = true;
  showView((root) => signInView(root, notice), "Sign in");
}

// -- routing ------------------------------------------------------------------------

const ROUTES = [
  [/^#\/home$/, "home", homeView, "Home"],
  [/^#\/aggregated$/, "aggregated", aggregatedView, "Grouped"],
  [/^#\/ranked$/, "ranked", rankedView, "Ranked"],
  [/^#\/notifications(?:\/([^/]+))?$/, "notifications", (root, user) => notificationsView(root, user || session.user), "Notifications"],
  [/^#\/firehose$/, "firehose", firehoseView, "Firehose"],
  [/^#\/u\/([^/]+)$/, "profile", profileView, "Profile"],
];

let closeView = () => {};

// Shows a view; a view returns (or resolves to) the function that closes
// what it opened, called when the next view replaces it.
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

function route() {
  if (!session) return signOut();
  const hash = location.hash || "#/home";
  if (hash === "#/profile") {
    location.hash = `#/u/${enc(session.user)}`;
    return;
  }
  for (const [pattern, nav, view, title] of ROUTES) {
    const match = pattern.exec(hash);
    if (match) {
      let args;
      try {
        args = match.slice(1).map((part) => (part === undefined ? undefined : decodeURIComponent(part)));
      } catch {
        location.hash = "#/home"; // a malformed link
        return;
      }
      const own = nav !== "profile" || args[0] === session.user;
      showView((root) => view(root, ...args), title, own ? nav : null);
      document.getElementById("profile-link").href = `#/u/${enc(session.user)}`;
      main().focus({ preventScroll: true });
      window.scrollTo({ top: 0 });
      return;
    }
  }
  location.hash = "#/home";
}

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
  if (!session) return signOut();
  try {
    await startSession();
  } catch (error) {
    return signOut(`Signed out: ${error.message}`);
  }
  route();
})();
