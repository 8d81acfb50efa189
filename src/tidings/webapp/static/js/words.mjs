// Words and numbers as the page shows them. Pure: Node's tests import it.

const PAST = {
  post: "posted",
  like: "liked",
  comment: "commented on",
  share: "shared",
  follow: "followed",
  mention: "mentioned",
};

export function pastTense(verb) {
  if (PAST[verb]) return PAST[verb];
  if (verb.endsWith("e")) return `${verb}d`;
  return `${verb}ed`;
}

// What kind of thing a reference is: an object's type, or the part of an id
// before its colon ("photo:1" is a photo).
export function refKind(ref) {
  if (ref && typeof ref === "object") return ref.type || "item";
  const text = String(ref || "");
  const colon = text.indexOf(":");
  return colon > 0 ? text.slice(0, colon) : "item";
}

export function plural(word, count) {
  if (count === 1) return word;
  if (word === "person") return "people";
  if (/[^aeiou]y$/.test(word)) return `${word.slice(0, -1)}ies`;
  if (/(s|x|ch|sh)$/.test(word)) return `${word}es`;
  return `${word}s`;
}

export const article = (word) => (/^[aeiou]/.test(word) ? `an ${word}` : `a ${word}`);

// "now", "5m", "3h", "2d", then the date; `now` is injected so tests need no clock.
export function relativeTime(iso, now = Date.now()) {
  const then = new Date(iso).getTime();
  const seconds = Math.max(0, (now - then) / 1000);
  if (seconds < 45) return "now";
  if (seconds < 3600) return `${Math.round(seconds / 60)}m`;
  if (seconds < 86_400) return `${Math.round(seconds / 3600)}h`;
  if (seconds < 7 * 86_400) return `${Math.round(seconds / 86_400)}d`;
  return new Date(iso).toLocaleDateString(undefined, { month: "short", day: "numeric" });
}

// Scores and explain values: integers as they are, others to a few digits.
export function formatNumber(value) {
  if (typeof value !== "number") return String(value);
  if (Number.isInteger(value)) return String(value);
  return value.toFixed(Math.abs(value) < 10 ? 3 : 1);
}

export const newActivities = (n) => (n === 1 ? "1 new activity" : `${n} new activities`);
