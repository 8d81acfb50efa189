// What the page knows of each activity shown: counts and the reader's own
// reactions, shared by every card of it (a card may be on the page twice).
// Pure bookkeeping (no DOM): Node's tests import it.

const known = new Map();

export function remember(activity) {
  const held = known.get(activity.id);
  const entry = held || { activity, counts: {}, own: {}, reported: new Set() };
  entry.activity = activity;
  // Counts a read brings are exact; an event's activity comes without them.
  if (activity.reaction_counts) entry.counts = { ...activity.reaction_counts };
  if (activity.own_reactions) entry.own = { ...activity.own_reactions };
  known.set(activity.id, entry);
  return entry;
}

export const entryOf = (activityId) => known.get(activityId);

export function forgetActivity(activityId) {
  known.delete(activityId);
}

export function forgetAll() {
  known.clear();
}

// A reaction event carries the activity's exact counts after it: they win
// over what the page guessed, and the reaction is noted so that the answer
// to the page's own request does not count it a second time. False when
// the event is not about a known activity's own reactions.
export function applyReactionEvent(type, data, me) {
  const entry = known.get(data.activity_id);
  if (!entry || data.parent) return false;
  entry.counts = { ...(data.reaction_counts || {}) };
  entry.reported.add(type === "reaction.added" ? data.id : `-${data.id}`);
  if (data.user === me) {
    const own = (entry.own[data.kind] || []).filter((r) => r.id !== data.id);
    entry.own[data.kind] = type === "reaction.added" ? [data, ...own] : own;
  }
  return true;
}

// The page's own reaction answered: counted unless its event came first.
export function countOwnAdded(entry, kind, reaction, created = true) {
  if (created && !entry.reported.has(reaction.id)) entry.counts[kind] = (entry.counts[kind] || 0) + 1;
}

export function countOwnRemoved(entry, kind, reaction) {
  if (!entry.reported.has(`-${reaction.id}`)) entry.counts[kind] = Math.max(0, (entry.counts[kind] || 1) - 1);
}
