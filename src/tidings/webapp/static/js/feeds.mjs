// Feed ids and the API paths that read them. Pure: Node's tests import it.

const enc = encodeURIComponent;

// A feed id ("group:key") as [group, key]; the key may hold colons, the group not.
export function splitFeed(feed) {
  const colon = feed.indexOf(":");
  return [feed.slice(0, colon), feed.slice(colon + 1)];
}

export function feedPath(feed) {
  const [group, key] = splitFeed(feed);
  return `/v1/feeds/${enc(group)}/${enc(key)}`;
}

// The URL of a page of `path` (which may already have a query), after `cursor`.
export function pageUrl(path, limit, cursor) {
  const sep = path.includes("?") ? "&" : "?";
  return `${path}${sep}limit=${limit}${cursor ? `&cursor=${enc(cursor)}` : ""}`;
}
