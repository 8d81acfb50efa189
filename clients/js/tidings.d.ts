// Types of tidings.mjs: the HTTP API's JSON, field names as the server sends them.

export type JSONValue = string | number | boolean | null | JSONValue[] | { [key: string]: JSONValue };
export type JSONObject = { [key: string]: JSONValue };

/** A problem+json body (RFC 9457). */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  /** The request field, or the setting, the refusal names. */
  field?: string | null;
}

export class TidingsError extends Error {
  constructor(status: number, problem: Partial<Problem> | null, headers?: Headers);
  /** The HTTP status; 0 for a WebSocket closed without one. */
  readonly status: number;
  readonly type: string;
  readonly title: string;
  readonly detail: string;
  readonly field: string | null;
  readonly problem: Partial<Problem>;
  /** Seconds the server asked to wait (Retry-After), if it did. */
  readonly retryAfter: number | null;
}

/** What publishing takes: an activity as the API's POST body. */
export interface ActivityIn {
  actor: string;
  verb: string;
  object: string;
  target?: string | null;
  /** ISO-8601 with an offset. */
  time?: string | null;
  foreign_id?: string | null;
  to?: string[];
  extra?: JSONObject;
}

export interface ReactionOut {
  id: string;
  activity_id: string;
  kind: string;
  user: string;
  data: JSONObject;
  parent: string | null;
  to: string[];
  created_at: string;
  updated_at: string;
  children_counts: Record<string, number>;
}

export interface Activity {
  id: string;
  /** With enrich: the user (or a tombstone). */
  actor: string | JSONObject;
  verb: string;
  object: string | JSONObject;
  target: string | JSONObject | null;
  time: string;
  foreign_id: string | null;
  to: string[];
  extra: JSONObject;
  score?: number | null;
  explain?: Record<string, number> | null;
  reaction_counts?: Record<string, number> | null;
  latest_reactions?: Record<string, ReactionOut[]> | null;
  own_reactions?: Record<string, ReactionOut[]> | null;
}

/** A create-or-return answer: `created` is false when it existed (HTTP 200, not 201). Not enumerable. */
export type Created<T> = T & { readonly created: boolean };

export interface Page<T> {
  results: T[];
  /** The cursor of the next page; null on the last. */
  next: string | null;
}

export interface ActivityPage extends Page<Activity> {
  /** Ranked feeds: the ranking was renewed. */
  renewed?: boolean;
}

export interface Aggregate {
  group: string;
  verb: string;
  activity_count: number;
  actor_count: number;
  activities: Activity[];
  created_at: string;
  updated_at: string;
  is_seen?: boolean | null;
  is_read?: boolean | null;
}

export interface AggregatePage extends Page<Aggregate> {
  unseen?: number | null;
  unread?: number | null;
}

export type FeedPage = ActivityPage | AggregatePage;

export interface Counts {
  unseen: number;
  unread: number;
}

export interface FeedStats {
  followers: number;
  following: number;
  activities: number;
}

export interface BatchOut {
  results: { created: boolean; activity: Activity }[];
}

export interface FollowPair {
  follower: string;
  source: string;
}

export interface FollowOut extends FollowPair {
  created: boolean;
}

export interface FollowRow extends FollowPair {
  created_at: string;
}

export interface ReactionIn {
  kind: string;
  user: string;
  data?: JSONObject;
  to?: string[];
  parent?: string | null;
}

export interface UserIn {
  id: string;
  handle: string;
  profile?: JSONObject;
}

export interface User {
  id: string;
  handle: string;
  profile: JSONObject;
  counts: FeedStats;
}

export interface StoredObject {
  type: string;
  id: string;
  data: JSONObject;
}

export interface Mute {
  target: string;
  until_ms: number | null;
  notifications: boolean;
}

export interface Filter {
  id: string;
  keywords: string[];
  whole_word: boolean;
  contexts: string[];
  until_ms: number | null;
  action: string;
}

export interface Health {
  status: string;
  pending_deliveries: number;
}

/** An ActivityStreams 2.0 OrderedCollectionPage. */
export interface As2Page {
  "@context": JSONValue;
  id: string;
  type: "OrderedCollectionPage";
  partOf: string;
  orderedItems: JSONObject[];
  next?: string;
  [key: string]: JSONValue | undefined;
}

/** A live event, over SSE or a WebSocket. `id` is null for resync, limit and error. */
export interface LiveEvent {
  feed: string;
  id: string | null;
  type:
    | "activity.added"
    | "activity.removed"
    | "activity.updated"
    | "reaction.added"
    | "reaction.removed"
    | "group.updated"
    | "counts.changed"
    | "resync"
    | "delete"
    | "limit"
    | "error"
    | (string & {});
  data: any;
}

export type Token = string | null | (() => string | null | Promise<string | null>);

export interface ClientOptions {
  /** Default: the global fetch. */
  fetch?: (url: string, init?: RequestInit) => Promise<Response>;
  /** Attempts after the first, for idempotent calls (default 3). */
  retries?: number;
  /** The first retry's wait in ms, doubled each time (default 250)... */
  backoffMs?: number;
  /** ...up to this (default 8000). */
  maxBackoffMs?: number;
  /** Sent with every request. */
  headers?: Record<string, string>;
  /** For socket(): default the global WebSocket. */
  WebSocket?: typeof WebSocket;
  /** Told of every error answer before it is thrown (a 401: sign out, say). */
  onError?: (error: TidingsError) => void;
}

export interface Paging {
  limit?: number;
  cursor?: string | null;
  signal?: AbortSignal;
}

export interface ReadOptions extends Paging {
  /** counts, latest, own (a list, or comma-separated). */
  reactions?: string | string[];
  user?: string;
  explain?: boolean;
  enrich?: boolean;
  fields?: string | string[];
  /** Notification feeds: mark the aggregates returned seen. */
  markSeen?: boolean;
}

export interface StreamOptions {
  signal?: AbortSignal;
  /** Called each time the stream is (re)opened. */
  onOpen?: () => void;
}

export interface EventsOptions extends StreamOptions {
  /** Replay every event after this one first. */
  lastEventId?: string | null;
  enrich?: boolean;
  fields?: string | string[];
}

export interface FirehoseFilters {
  track?: string | string[];
  follow?: string | string[];
  locations?: string | string[];
  sample?: string | number;
}

export interface RequestOptions {
  query?: Record<string, string | number | boolean | string[] | null | undefined>;
  body?: unknown;
  /** Retry network failures and 408/425/429/5xx: for idempotent calls only. */
  retry?: boolean;
  accept?: string;
  signal?: AbortSignal;
}

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  data: T;
}

export function feedPath(feed: string): string;
export function pagesOf<P extends { next: string | null }>(fetchPage: (cursor: string | null) => Promise<P>): AsyncGenerator<P, void, undefined>;
export function sseFrames(
  body: ReadableStream<Uint8Array>,
): AsyncGenerator<{ event: string | null; id: string | null; data: string; retry: number | null }, void, undefined>;

export class Client {
  constructor(baseUrl?: string, token?: Token, options?: ClientOptions);
  baseUrl: string;
  token: Token;

  /** Any call; errors are TidingsError. */
  request<T = any>(method: string, path: string, options?: RequestOptions): Promise<ApiResponse<T>>;

  read(feed: string, options?: ReadOptions): Promise<FeedPage>;
  pages(feed: string, options?: Omit<ReadOptions, "cursor">): AsyncGenerator<FeedPage, void, undefined>;
  readAs2(feed: string, options?: Omit<ReadOptions, "markSeen">): Promise<As2Page>;
  markSeen(feed: string, aggregates?: string[] | null): Promise<Counts>;
  markRead(feed: string, aggregates?: string[] | null): Promise<Counts>;
  stats(feed: string): Promise<FeedStats>;

  publish(feed: string, activity: ActivityIn): Promise<Created<Activity>>;
  publishBatch(feed: string, activities: ActivityIn[]): Promise<BatchOut>;
  activityByForeignId(feed: string, foreignId: string): Promise<Activity>;
  getActivity(id: string, options?: { enrich?: boolean; fields?: string | string[]; signal?: AbortSignal }): Promise<Activity>;
  updateActivity(id: string, changes: { set?: JSONObject; unset?: string[] }): Promise<Activity>;
  removeActivity(feed: string, id: string): Promise<void>;
  removeByForeignId(feed: string, foreignId: string): Promise<void>;

  follow(follower: string, source: string, options?: { copyLimit?: number }): Promise<FollowOut>;
  unfollow(follower: string, source: string, options?: { keepHistory?: boolean }): Promise<void>;
  followBatch(follows: FollowPair[], options?: { copyLimit?: number }): Promise<{ created: FollowPair[] }>;
  followers(feed: string, options?: Paging): Promise<Page<FollowRow>>;
  following(feed: string, options?: Paging): Promise<Page<FollowRow>>;

  addReaction(activityId: string, reaction: ReactionIn): Promise<Created<ReactionOut>>;
  reactions(activityId: string, options?: Paging & { kind?: string }): Promise<Page<ReactionOut>>;
  getReaction(id: string): Promise<ReactionOut>;
  reactionChildren(id: string, options?: Paging & { kind?: string }): Promise<Page<ReactionOut>>;
  updateReaction(id: string, data: JSONObject): Promise<ReactionOut>;
  removeReaction(id: string, options?: { soft?: boolean }): Promise<void>;
  restoreReaction(id: string): Promise<ReactionOut>;

  createUser(user: UserIn): Promise<User>;
  getUser(id: string): Promise<User>;
  userByHandle(handle: string): Promise<User>;
  updateUser(id: string, changes: { handle?: string; profile?: JSONObject }): Promise<User>;
  deleteUser(id: string): Promise<void>;
  putObject(kind: string, id: string, data: JSONObject): Promise<Created<StoredObject>>;
  getObject(kind: string, id: string): Promise<StoredObject>;
  deleteObject(kind: string, id: string): Promise<void>;

  mute(user: string, target: string, options?: { durationS?: number; notifications?: boolean }): Promise<Mute>;
  mutes(user: string): Promise<{ results: Mute[] }>;
  unmute(user: string, target: string): Promise<void>;
  block(user: string, target: string): Promise<{ target: string }>;
  blocks(user: string): Promise<{ results: { target: string }[] }>;
  unblock(user: string, target: string): Promise<void>;
  addFilter(
    user: string,
    keywords: string[],
    options?: { wholeWord?: boolean; contexts?: string[]; durationS?: number },
  ): Promise<Filter>;
  filters(user: string): Promise<{ results: Filter[] }>;
  deleteFilter(user: string, id: string): Promise<void>;

  health(): Promise<Health>;

  /** A feed's live events over SSE, resumed with Last-Event-ID when dropped. */
  events(feed: string, options?: EventsOptions): AsyncGenerator<LiveEvent, void, undefined>;
  /** The firehose over SSE (a server token, or scope firehose). */
  firehose(options?: FirehoseFilters & StreamOptions): AsyncGenerator<LiveEvent, void, undefined>;
  /** A WebSocket for many feeds (and firehoses). */
  socket(options?: { WebSocket?: typeof WebSocket }): Promise<LiveSocket>;
}

export class LiveSocket implements AsyncIterable<LiveEvent> {
  /** Each feed's last event id seen, to subscribe from on a new socket. */
  readonly lastEventIds: Record<string, string>;
  readonly closed: { code: number; reason: string } | null;
  subscribe(
    feed: string,
    options?: { lastEventId?: string | null; enrich?: boolean; fields?: string },
  ): Promise<{ type: "subscribed"; feed: string }>;
  unsubscribe(feed: string): Promise<{ type: "unsubscribed"; feed: string }>;
  subscribeFirehose(filters?: FirehoseFilters): Promise<{ type: "subscribed"; feed: "$firehose" }>;
  [Symbol.asyncIterator](): AsyncGenerator<LiveEvent, void, undefined>;
  close(): void;
}

export default Client;
