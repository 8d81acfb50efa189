// Likes and reaction events: counts change on every card of the activity.

import { repaint } from "./cards.mjs";
import { client } from "./client.mjs";
import { appendComment } from "./comments.mjs";
import { groupOf } from "./config.mjs";
import { toast } from "./dom.mjs";
import { applyReactionEvent, countOwnAdded, countOwnRemoved, entryOf } from "./known.mjs";
import { notifyTargets } from "./notify.mjs";
import { me } from "./session.mjs";

export function reactionEvent(type, data) {
  if (!applyReactionEvent(type, data, me())) return;
  repaint(data.activity_id);
  if (data.kind === "comment" && type === "reaction.added") appendComment(data.activity_id, data);
}

export async function toggleLike(activityId) {
  const entry = entryOf(activityId);
  const mine = entry.own.like && entry.own.like[0];
  try {
    if (mine) {
      await client.removeReaction(mine.id);
      entry.own.like = [];
      countOwnRemoved(entry, "like", mine);
    } else {
      const like = await client.addReaction(activityId, {
        kind: "like",
        user: me(),
        to: notifyTargets(entry.activity, me(), groupOf("notifications")),
      });
      entry.own.like = [like];
      // Not created: a like already held (likes are unique), counted already.
      countOwnAdded(entry, "like", like, like.created);
    }
  } catch (error) {
    toast(`Could not change the like: ${error.message}`);
  }
  repaint(activityId);
}
