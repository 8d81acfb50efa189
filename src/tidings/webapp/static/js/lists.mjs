// The two kinds of feed list: activities (flat and ranked feeds) and groups
// (aggregated and notification feeds), each with its live events.

import { activityCard } from "./activity-card.mjs";
import { client } from "./client.mjs";
import { atTop, FeedList } from "./feed-list.mjs";
import { groupCard } from "./group-card.mjs";
import { entryOf } from "./known.mjs";
import { reactionEvent } from "./reactions.mjs";

export function activityList({ feed, options = {}, label, empty, score = false, liveInsert = true }) {
  const list = new FeedList({
    read: (cursor, limit) => client.read(feed, { enrich: true, reactions: "counts,own", ...options, cursor, limit }),
    events: (stream) => client.events(feed, { enrich: true, ...stream }),
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
      const { reaction_counts: _c, own_reactions: _o, ...held } = entryOf(data.id)?.activity || {};
      list.replace({ ...held, ...data });
    } else if (type === "reaction.added" || type === "reaction.removed") reactionEvent(type, data);
    else if (type === "resync") list.reload();
  };
  return list;
}

// A changed group moves to the top (or waits, once the reader has scrolled).
export function groupList({ feed, label, empty, notification = false }) {
  const list = new FeedList({
    read: (cursor, limit) => client.read(feed, { enrich: true, cursor, limit }),
    events: (stream) => client.events(feed, { enrich: true, ...stream }),
    render: (value) => groupCard(value, { notification }),
    keyOf: (value) => value.group,
    label,
    empty,
  });
  list.onEvent = (type, data) => {
    if (type === "group.updated") {
      if (data.removed) list.remove(data.group);
      else if (list.keys.has(data.group) && atTop()) list.prepend(data);
      else if (list.keys.has(data.group)) list.replace(data);
      else list.arrived(data);
    } else if (type === "resync") list.reload();
  };
  return list;
}
