// The page's config: what the server put in <script id="tidings-config">
// (sign-in options and the feed groups the app reads). Parsed here, held
// here, so no other module reads the page for it.

const ROLES = ["home", "profile", "aggregated", "ranked", "notifications"];

// The config from the element's text; anything missing or malformed counts
// as absent (no dev sign-in, no users, a group left out), never a crash.
export function parseConfig(text) {
  let raw;
  try {
    raw = JSON.parse(text || "{}");
  } catch {
    raw = {};
  }
  if (!raw || typeof raw !== "object") raw = {};
  const given = raw.groups && typeof raw.groups === "object" ? raw.groups : {};
  const groups = {};
  for (const role of ROLES) {
    groups[role] = typeof given[role] === "string" && given[role] ? given[role] : null;
  }
  return {
    devSignIn: raw.devSignIn === true,
    users: Array.isArray(raw.users) ? raw.users : [],
    groups,
  };
}

let current = parseConfig("{}");

export function configure(config) {
  current = config;
}

export const config = () => current;

// The group playing `role` (home, profile, aggregated, ranked, notifications), or null.
export const groupOf = (role) => current.groups[role];

// The feeds a follow connects to a followed user's profile feed: each of the
// user's timelines this server has.
export function followingGroups(groups = current.groups) {
  return [groups.home, groups.aggregated, groups.ranked].filter(Boolean);
}
