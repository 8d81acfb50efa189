// tidings: a client of the tidings HTTP API, for browsers and Node >= 18.
//
// One ES module with no dependencies and no build step: calls go through
// `fetch`, live events are read from `fetch`'s body stream (so the token
// travels in the Authorization header, which EventSource cannot send), and a
// WebSocket is opened only when a caller asks for one. Results are the HTTP
// API's JSON as the server sent it: field names are the API's own.
// The web app served by `tidings serve --app` loads this same file.

/** Statuses a retried request may get a different answer to. */
const RETRYABLE = new Set([408, 425, 429, 500, 502, 503, 504]);
const PROBLEM = "application/problem+json";
const EVENT_STREAM = "text/event-stream";
/** Events that are no position in a feed: the server gives them no id. */
const NO_ID = new Set(["resync", "limit", "error"]);

/** An error answer of the API, carrying its problem+json (RFC 9457). */
export class TidingsError extends Error {
  constructor(status, problem, headers) {
    const body = problem && typeof problem === "object" ? problem : {};
    const detail = typeof body.detail === "string" ? body.detail : `HTTP ${status}`;
    super(detail);
    this.name = "TidingsError";
    this.status = status;
    this.type = typeof body.type === "string" ? body.type : "about:blank";
    this.title = typeof body.title === "string" ? body.title : "";
    this.detail = detail;
    // The request field, or setting, a refusal names (a limit it ran into).
    this.field = typeof body.field === "string" ? body.field : null;
    this.problem = body;
    this.retryAfter = retryAfterSeconds(headers?.get?.("retry-after"));
  }
}

function retryAfterSeconds(value) {
  if (value == null || value === "") return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds);
  const when = Date.parse(value);
  return Number.isNaN(when) ? null : Math.max(0, (when - Date.now()) / 1000);
}

const enc = encodeURIComponent;

/** `/v1/feeds/{group}/{key}` of a feed id `group:key` (the key may hold colons). */
export function feedPath(feed) {
  if (typeof feed !== "string") throw new TypeError(`a feed id is a string such as "timeline:alice"`);
  const colon = feed.indexOf(":");
  if (colon <= 0) throw new TypeError(`not a feed id (group:key): ${JSON.stringify(feed)}`);
  return `/v1/feeds/${enc(feed.slice(0, colon))}/${enc(feed.slice(colon + 1))}`;
}

/** Every page of a cursor-paged call: `fetchPage(cursor)` until `next` is null. */
export async function* pagesOf(fetchPage) {
  let cursor = null;
  do {
    const page = await fetchPage(cursor);
    yield page;
    cursor = page.next ?? null;
  } while (cursor);
}

const sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(done, ms);
    function done() {
      signal?.removeEventListener("abort", aborted);
      resolve();
    }
    function aborted() {
      clearTimeout(timer);
      reject(signal.reason);
    }
    signal?.addEventListener("abort", aborted, { once: true });
  });

/** The wait before attempt `attempt` (1 = the first retry): doubling, jittered, capped. */
function backoff(attempt, base, max) {
  const ceiling = Math.min(max, base * 2 ** (attempt - 1));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

function query(values) {
  const parts = [];
  for (const [name, value] of Object.entries(values || {})) {
    if (value === undefined || value === null || value === false) continue;
    const text = Array.isArray(value) ? value.join(",") : String(value);
    parts.push(`${enc(name)}=${enc(text)}`);
  }
  return parts.length ? `?${parts.join("&")}` : "";
}

// Marks a create-or-return answer: true for 201, false for 200. Not
// enumerable, so the result still serialises as exactly the server's JSON.
function withCreated(data, status) {
  if (data && typeof data === "object") {
    Object.defineProperty(data, "created", { value: status === 201, enumerable: false, configurable: true });
  }
  return data;
}

function isAbort(error, signal) {
  return Boolean(signal?.aborted) || error?.name === "AbortError";
}

export class Client {
  #fetch;
  #retries;
  #backoffMs;
  #maxBackoffMs;
  #headers;
  #WebSocket;
  #onError;

  /**
   * `baseUrl`: where the service answers ("" in a page it serves: its origin).
   * `token`: a bearer token, or a function returning one (called per request).
   */
  constructor(baseUrl = "", token = null, options = {}) {
    this.baseUrl = String(baseUrl || "").replace(/\/+$/, "");
    this.token = token;
    const fetcher = options.fetch || globalThis.fetch;
    if (typeof fetcher !== "function") throw new TypeError("no fetch: pass options.fetch");
    // Called unbound: a browser's fetch refuses another object as `this`.
    this.#fetch = (url, init) => fetcher(url, init);
    this.#retries = options.retries ?? 3;
    this.#backoffMs = options.backoffMs ?? 250;
    this.#maxBackoffMs = options.maxBackoffMs ?? 8000;
    this.#headers = { ...(options.headers || {}) };
    this.#WebSocket = options.WebSocket || null;
    this.#onError = options.onError || null;
  }

  async #authorization() {
    const token = typeof this.token === "function" ? await this.token() : this.token;
    return token ? `Bearer ${token}` : null;
  }

  #url(path) {
    return `${this.baseUrl}${path}`;
  }

  // -- the one way a call is made ---------------------------------------------

  /**
   * Any call: `{status, headers, data}`, `data` the parsed JSON (null for 204).
   * Errors are TidingsError; `retry` (for idempotent calls only) retries
   * network failures and 408/425/429/5xx answers, backing off.
   */
  async request(method, path, { query: values, body, retry = false, accept, signal } = {}) {
    const url = this.#url(path + query(values));
    for (let attempt = 0; ; attempt += 1) {
      const headers = { ...this.#headers, Accept: accept || "application/json" };
      const authorization = await this.#authorization();
      if (authorization) headers.Authorization = authorization;
      if (body !== undefined) headers["Content-Type"] = "application/json";
      const init = { method, headers, signal, body: body === undefined ? undefined : JSON.stringify(body) };
      let response;
      try {
        response = await this.#fetch(url, init);
      } catch (error) {
        if (!retry || isAbort(error, signal) || attempt >= this.#retries) throw error;
        await sleep(backoff(attempt + 1, this.#backoffMs, this.#maxBackoffMs), signal);
        continue;
      }
      if (response.ok) {
        const data = response.status === 204 ? null : await parseBody(response);
        return { status: response.status, headers: response.headers, data };
      }
      const error = new TidingsError(response.status, await parseBody(response).catch(() => null), response.headers);
      if (retry && RETRYABLE.has(response.status) && attempt < this.#retries) {
        const wait = error.retryAfter !== null ? error.retryAfter * 1000 : backoff(attempt + 1, this.#backoffMs, this.#maxBackoffMs);
        await sleep(Math.min(wait, this.#maxBackoffMs), signal);
        continue;
      }
      this.#onError?.(error);
      throw error;
    }
  }

  async #call(method, path, options) {
    return (await this.request(method, path, options)).data;
  }

  // A read: retried. A `signal` among the values aborts it.
  #get(path, values = {}, options = {}) {
    const { signal, ...rest } = values;
    return this.#call("GET", path, { query: rest, retry: true, signal, ...options });
  }

  // -- feeds: read, pages, marks, counts --------------------------------------

  /**
   * A page of a feed (flat, ranked or grouped: the server knows which);
   * `options`: limit, cursor, reactions, user, explain, enrich, fields, markSeen.
   */
  read(feed, options = {}) {
    const { markSeen, ...rest } = options;
    return this.#get(feedPath(feed), { ...rest, mark_seen: markSeen });
  }

  /** Every page of a feed, in order, by cursor (`for await (const page of ...)`). */
  pages(feed, options = {}) {
    return pagesOf((cursor) => this.read(feed, { ...options, cursor }));
  }

  /** A page as an ActivityStreams 2.0 OrderedCollectionPage (flat and ranked feeds). */
  readAs2(feed, options = {}) {
    return this.#get(feedPath(feed), { ...options, format: "as2" }, { accept: "application/activity+json" });
  }

  /** Mark aggregates (by key) of a notification feed seen (none given: all); the counts after. */
  markSeen(feed, aggregates) {
    // (The JSON field keeps its first name, "groups".)
    return this.#call("POST", `${feedPath(feed)}/seen`, { body: aggregates ? { groups: aggregates } : { all: true } });
  }

  /** Mark aggregates (by key) of a notification feed read (none given: all); the counts after. */
  markRead(feed, aggregates) {
    return this.#call("POST", `${feedPath(feed)}/read`, { body: aggregates ? { groups: aggregates } : { all: true } });
  }

  /** Exact follower, following and published-activity counts of a feed. */
  stats(feed) {
    return this.#get(`${feedPath(feed)}/stats`);
  }

  // -- activities --------------------------------------------------------------

  /**
   * Publish an activity to a feed; the stored activity (`.created` false when
   * its `foreign_id` was already used). Retried only when it has a foreign_id.
   */
  async publish(feed, activity) {
    const retry = Boolean(activity && activity.foreign_id);
    const { status, data } = await this.request("POST", `${feedPath(feed)}/activities`, { body: activity, retry });
    return withCreated(data, status);
  }

  /** Publish up to 100 activities at once (all or none); retried only when every one has a foreign_id. */
  publishBatch(feed, activities) {
    const retry = activities.length > 0 && activities.every((a) => a && a.foreign_id);
    return this.#call("POST", `${feedPath(feed)}/activities:batch`, { body: { activities }, retry });
  }

  /** The activity with `foreignId` in this feed. */
  activityByForeignId(feed, foreignId) {
    return this.#get(`${feedPath(feed)}/activities`, { foreign_id: foreignId });
  }

  /** One activity by id; `options`: enrich, fields. */
  getActivity(id, options = {}) {
    return this.#get(`/v1/activities/${enc(id)}`, options);
  }

  /** Set and unset keys of an activity's `extra`. */
  updateActivity(id, { set = {}, unset = [] } = {}) {
    return this.#call("PATCH", `/v1/activities/${enc(id)}`, { body: { set, unset } });
  }

  /** Remove an activity from this feed (and every feed it reached through it). */
  async removeActivity(feed, id) {
    await this.#call("DELETE", `${feedPath(feed)}/activities/${enc(id)}`);
  }

  /** Remove the activity with `foreignId` from this feed and every feed it reached. */
  async removeByForeignId(feed, foreignId) {
    await this.#call("DELETE", `${feedPath(feed)}/activities${query({ foreign_id: foreignId })}`);
  }

  // -- follows -----------------------------------------------------------------

  /** `follower` follows `source`; `{follower, source, created}`. */
  follow(follower, source, { copyLimit } = {}) {
    const body = copyLimit === undefined ? { source } : { source, copy_limit: copyLimit };
    return this.#call("POST", `${feedPath(follower)}/follows`, { body });
  }

  /** Stop following `source`; unless `keepHistory`, drop what came through it. */
  async unfollow(follower, source, { keepHistory = false } = {}) {
    await this.#call("DELETE", `${feedPath(follower)}/follows/${enc(source)}`, { query: { keep_history: keepHistory } });
  }

  /** Up to 1,000 follows (`[{follower, source}]`) in one transaction; `{created: [...]}`. */
  followBatch(follows, { copyLimit } = {}) {
    const body = copyLimit === undefined ? { follows } : { follows, copy_limit: copyLimit };
    return this.#call("POST", "/v1/follows:batch", { body });
  }

  /** A page of the feeds following this one; `options`: limit, cursor. */
  followers(feed, options = {}) {
    return this.#get(`${feedPath(feed)}/followers`, options);
  }

  /** A page of the feeds this one follows; `options`: limit, cursor. */
  following(feed, options = {}) {
    return this.#get(`${feedPath(feed)}/following`, options);
  }

  // -- reactions ---------------------------------------------------------------

  /**
   * React to an activity (`{kind, user, data, to, parent}`); the reaction
   * (`.created` false when a unique kind was already added).
   */
  async addReaction(activityId, reaction) {
    const { status, data } = await this.request("POST", `/v1/activities/${enc(activityId)}/reactions`, { body: reaction });
    return withCreated(data, status);
  }

  /** A page of an activity's reactions, newest first; `options`: kind, limit, cursor. */
  reactions(activityId, options = {}) {
    return this.#get(`/v1/activities/${enc(activityId)}/reactions`, options);
  }

  getReaction(id) {
    return this.#get(`/v1/reactions/${enc(id)}`);
  }

  /** A page of the reactions to a reaction; `options`: kind, limit, cursor. */
  reactionChildren(id, options = {}) {
    return this.#get(`/v1/reactions/${enc(id)}/children`, options);
  }

  /** Replace a reaction's `data`. */
  updateReaction(id, data) {
    return this.#call("PATCH", `/v1/reactions/${enc(id)}`, { body: { data } });
  }

  /** Remove a reaction and those under it; `{ soft: true }`: restorable. */
  async removeReaction(id, options = {}) {
    const query = options.soft ? { soft: "true" } : undefined;
    await this.#call("DELETE", `/v1/reactions/${enc(id)}`, { query });
  }

  /** Bring back a reaction removed with `{ soft: true }`, with those under it. */
  restoreReaction(id) {
    return this.#call("POST", `/v1/reactions/${enc(id)}/restore`);
  }

  // -- users and objects -------------------------------------------------------

  /** Create a user (`{id, handle, profile}`). */
  createUser(user) {
    return this.#call("POST", "/v1/users", { body: user });
  }

  getUser(id) {
    return this.#get(`/v1/users/${enc(id)}`);
  }

  userByHandle(handle) {
    return this.#get(`/v1/users/by-handle/${enc(handle)}`);
  }

  /** Rename and/or replace the profile (`{handle, profile}`). */
  updateUser(id, changes) {
    return this.#call("PATCH", `/v1/users/${enc(id)}`, { body: changes });
  }

  async deleteUser(id) {
    await this.#call("DELETE", `/v1/users/${enc(id)}`);
  }

  /** Store what activities refer to as `kind:id` (`.created` false when replaced). */
  async putObject(kind, id, data) {
    const { status, data: stored } = await this.request("PUT", `/v1/objects/${enc(kind)}/${enc(id)}`, { body: { data } });
    return withCreated(stored, status);
  }

  getObject(kind, id) {
    return this.#get(`/v1/objects/${enc(kind)}/${enc(id)}`);
  }

  async deleteObject(kind, id) {
    await this.#call("DELETE", `/v1/objects/${enc(kind)}/${enc(id)}`);
  }

  // -- a user's rules: mutes, blocks, filters ---------------------------------

  /** Hide `target` from `user`'s reads and events; `options`: durationS, notifications. */
  mute(user, target, { durationS, notifications } = {}) {
    const body = { target };
    if (durationS !== undefined) body.duration_s = durationS;
    if (notifications !== undefined) body.notifications = notifications;
    return this.#call("POST", `/v1/users/${enc(user)}/mutes`, { body });
  }

  mutes(user) {
    return this.#get(`/v1/users/${enc(user)}/mutes`);
  }

  async unmute(user, target) {
    await this.#call("DELETE", `/v1/users/${enc(user)}/mutes/${enc(target)}`);
  }

  block(user, target) {
    return this.#call("POST", `/v1/users/${enc(user)}/blocks`, { body: { target } });
  }

  blocks(user) {
    return this.#get(`/v1/users/${enc(user)}/blocks`);
  }

  async unblock(user, target) {
    await this.#call("DELETE", `/v1/users/${enc(user)}/blocks/${enc(target)}`);
  }

  /** Hide activities holding any of `keywords`; `options`: wholeWord, contexts, durationS. */
  addFilter(user, keywords, { wholeWord, contexts, durationS } = {}) {
    const body = { keywords };
    if (wholeWord !== undefined) body.whole_word = wholeWord;
    if (contexts !== undefined) body.contexts = contexts;
    if (durationS !== undefined) body.duration_s = durationS;
    return this.#call("POST", `/v1/users/${enc(user)}/filters`, { body });
  }

  filters(user) {
    return this.#get(`/v1/users/${enc(user)}/filters`);
  }

  async deleteFilter(user, id) {
    await this.#call("DELETE", `/v1/users/${enc(user)}/filters/${enc(id)}`);
  }

  // -- operations --------------------------------------------------------------

  /** `{status, pending_deliveries}` while both stores answer (a 503 TidingsError else). */
  health() {
    return this.#get("/healthz");
  }

  // -- live events -------------------------------------------------------------

  /**
   * A feed's live events over SSE: `for await (const event of client.events(feed))`,
   * each `{feed, id, type, data}`. A dropped stream is opened again with
   * Last-Event-ID, so nothing is missed or repeated; a refusal (401, 403,
   * 404, 422...) is thrown as a TidingsError. `options`: lastEventId, enrich,
   * fields, signal, onOpen (called on every connection).
   */
  events(feed, options = {}) {
    const { lastEventId, enrich, fields, ...rest } = options;
    const path = `${feedPath(feed)}/events${query({ enrich, fields })}`;
    return this.#stream(path, feed, { ...rest, lastEventId, resume: true });
  }

  /**
   * Every activity published from now on that passes the filters, over SSE
   * (a server token, or one with scope `firehose`). `options`: track, follow,
   * locations, sample (each a string or a list), signal, onOpen.
   */
  firehose(options = {}) {
    const { track, follow, locations, sample, ...rest } = options;
    const path = `/v1/firehose${query({ track, follow, locations, sample })}`;
    return this.#stream(path, "$firehose", { ...rest, resume: false });
  }

  async *#stream(path, feed, { lastEventId = null, resume, signal, onOpen } = {}) {
    const controller = new AbortController();
    const stop = () => controller.abort(signal?.reason);
    if (signal?.aborted) return;
    signal?.addEventListener("abort", stop, { once: true });
    let lastId = lastEventId;
    let retryMs = null; // the server's `retry:`, if it sent one
    let failures = 0;
    try {
      for (;;) {
        const headers = { ...this.#headers, Accept: EVENT_STREAM };
        const authorization = await this.#authorization();
        if (authorization) headers.Authorization = authorization;
        if (resume && lastId) headers["Last-Event-ID"] = lastId;
        let response = null;
        try {
          response = await this.#fetch(this.#url(path), { headers, signal: controller.signal, cache: "no-store" });
        } catch (error) {
          if (controller.signal.aborted) return;
          failures += 1;
        }
        if (response && !response.ok) {
          const error = new TidingsError(response.status, await parseBody(response).catch(() => null), response.headers);
          if (!RETRYABLE.has(response.status)) {
            this.#onError?.(error);
            throw error;
          }
          failures += 1;
          const wait = error.retryAfter !== null ? error.retryAfter * 1000 : null;
          await sleep(wait ?? backoff(failures, this.#backoffMs, this.#maxBackoffMs), controller.signal).catch(() => {});
          if (controller.signal.aborted) return;
          continue;
        }
        if (response) {
          failures = 0;
          onOpen?.();
          try {
            for await (const frame of sseFrames(response.body)) {
              if (frame.retry !== null) retryMs = frame.retry;
              if (frame.id !== null) lastId = frame.id;
              if (frame.event === null) continue;
              yield { feed, id: frame.id, type: frame.event, data: parseData(frame.data) };
            }
          } catch (error) {
            if (controller.signal.aborted) return;
            // Dropped: opened again below, from the last event id.
          }
          if (controller.signal.aborted) return;
          failures += 1;
        }
        const wait = retryMs ?? backoff(failures, this.#backoffMs, this.#maxBackoffMs);
        await sleep(wait, controller.signal).catch(() => {});
        if (controller.signal.aborted) return;
      }
    } finally {
      signal?.removeEventListener("abort", stop);
      controller.abort();
    }
  }

  /**
   * A WebSocket for many feeds at once (and firehoses): see LiveSocket. Uses
   * `options.WebSocket`, else the client's, else the global one.
   */
  async socket(options = {}) {
    const WebSocketClass = options.WebSocket || this.#WebSocket || globalThis.WebSocket;
    if (typeof WebSocketClass !== "function") {
      throw new TypeError("no WebSocket here: pass options.WebSocket (Node 20: run with --experimental-websocket)");
    }
    const base = new URL(this.baseUrl || globalThis.location?.origin || "", globalThis.location?.href);
    base.protocol = base.protocol === "https:" ? "wss:" : "ws:";
    const url = `${base.origin}${base.pathname.replace(/\/+$/, "")}/v1/stream`;
    const token = typeof this.token === "function" ? await this.token() : this.token;
    // A browser cannot set headers on a WebSocket: the token is the subprotocol offered.
    const socket = new WebSocketClass(url, token ? [token] : []);
    const live = new LiveSocket(socket);
    await live.opened;
    return live;
  }
}

/**
 * One WebSocket carrying the events of many feeds: `subscribe(feed)` and
 * `unsubscribe(feed)` resolve on the server's reply (a refusal rejects with
 * a TidingsError); events come from `for await (const event of socket)`, each
 * `{feed, id, type, data}`. `lastEventIds` holds each feed's last event id,
 * to subscribe from after opening a new socket.
 */
export class LiveSocket {
  #queue = [];
  #waiting = null;
  #replies = [];
  #refused = null;

  constructor(socket) {
    this.socket = socket;
    this.lastEventIds = {};
    this.closed = null; // {code, reason} once closed
    socket.binaryType = "arraybuffer";
    // A refused handshake (a bad token, say) is an "error" and, in some
    // implementations, no "close": either ends the socket. Its status is
    // not told to scripts; 4401 is the server's close for an expired token.
    this.opened = new Promise((resolve, reject) => {
      socket.addEventListener("open", () => resolve(), { once: true });
      this.#refused = reject;
    });
    this.opened.catch(() => {});
    socket.addEventListener("message", (event) => this.#message(event.data));
    socket.addEventListener("close", (event) => this.#ended(event.code, event.reason));
    socket.addEventListener("error", () => this.#ended(1006, "the WebSocket failed"));
  }

  #ended(code, reason) {
    if (this.closed) return;
    this.closed = { code, reason };
    const error = () => new TidingsError(code === 4401 ? 401 : 0, { detail: reason || `WebSocket closed (${code})` });
    this.#refused(error());
    for (const reply of this.#replies.splice(0)) reply.reject(error());
    this.#wake();
  }

  #message(raw) {
    const text = typeof raw === "string" ? raw : new TextDecoder().decode(raw);
    let message;
    try {
      message = JSON.parse(text);
    } catch {
      return;
    }
    if (message.type === "subscribed" || message.type === "unsubscribed" || (message.type === "error" && !("feed" in message))) {
      const reply = this.#replies.shift();
      if (!reply) return;
      if (message.type === "error") reply.reject(new TidingsError(400, { title: "Bad Request", detail: message.error }));
      else reply.resolve(message);
      return;
    }
    // As over SSE: no id for events that are no position in a feed.
    const event = { feed: message.feed, id: NO_ID.has(message.type) ? null : message.id, type: message.type, data: message.data };
    if (event.feed && event.id) this.lastEventIds[event.feed] = event.id;
    this.#queue.push(event);
    this.#wake();
  }

  #wake() {
    const waiting = this.#waiting;
    this.#waiting = null;
    waiting?.();
  }

  #send(message) {
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new TidingsError(0, { detail: "WebSocket closed" }));
      this.#replies.push({ resolve, reject });
      this.socket.send(JSON.stringify(message));
    });
  }

  /** Events of `feed` from now on (or after `lastEventId`); `options`: lastEventId, enrich, fields. */
  subscribe(feed, { lastEventId, enrich, fields } = {}) {
    const message = { type: "subscribe", feed };
    const after = lastEventId ?? this.lastEventIds[feed];
    if (after) message.last_event_id = after;
    if (enrich) message.enrich = true;
    if (fields) message.fields = fields;
    return this.#send(message);
  }

  unsubscribe(feed) {
    return this.#send({ type: "unsubscribe", feed });
  }

  /** A firehose on this socket; `filters`: track, follow, locations, sample. */
  subscribeFirehose(filters = {}) {
    return this.#send({ type: "subscribe", firehose: filters });
  }

  async *[Symbol.asyncIterator]() {
    try {
      for (;;) {
        while (this.#queue.length) yield this.#queue.shift();
        if (this.closed) return;
        await new Promise((resolve) => (this.#waiting = resolve));
      }
    } finally {
      this.close();
    }
  }

  close() {
    if (!this.closed) this.socket.close(1000);
  }
}

async function parseBody(response) {
  const text = await response.text();
  if (!text) return null;
  const type = (response.headers.get("content-type") || "").split(";")[0].trim();
  if (type === "application/json" || type === PROBLEM || type.endsWith("+json")) return JSON.parse(text);
  return text;
}

function parseData(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * The events of an SSE body (a ReadableStream of bytes), as the HTML
 * standard parses them: `{event, id, data, retry}`; `event` null for a
 * block that dispatches nothing (a comment, a heartbeat) but may carry an
 * id or a retry.
 */
export async function* sseFrames(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let block = { event: "", data: [], id: null, retry: null, hasData: false };
  const fresh = () => ({ event: "", data: [], id: null, retry: null, hasData: false });
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      // Lines end in \r\n, \n or \r; a \r last in the buffer may be half of \r\n.
      let start = 0;
      for (;;) {
        const match = /\r\n|\n|\r/g;
        match.lastIndex = start;
        const found = match.exec(buffer);
        if (!found || (found[0] === "\r" && found.index === buffer.length - 1 && !done)) break;
        const line = buffer.slice(start, found.index);
        start = found.index + found[0].length;
        if (line === "") {
          if (block.hasData || block.id !== null || block.retry !== null) {
            yield {
              event: block.hasData ? block.event || "message" : null,
              id: block.id,
              data: block.data.join("\n"),
              retry: block.retry,
            };
          }
          block = fresh();
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") block.event = value;
        else if (field === "data") {
          block.data.push(value);
          block.hasData = true;
        } else if (field === "id" && !value.includes("\0")) block.id = value;
        else if (field === "retry" && /^\d+$/.test(value)) block.retry = Number(value);
      }
      buffer = buffer.slice(start);
      if (done) return; // an unfinished block at the end is dropped, as the standard says
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

export default Client;
