// Whom a reaction notifies: the activity's author, in their notification
// feed (not oneself, and nobody when the server has no notification group).

import { userOf } from "./activity.mjs";

export function notifyTargets(activity, me, notificationGroup) {
  const author = userOf(activity.actor).id;
  return author === me || !notificationGroup ? [] : [`${notificationGroup}:${author}`];
}
