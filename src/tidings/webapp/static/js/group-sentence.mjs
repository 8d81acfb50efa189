// "bob and 2 others liked 3 photos": a group's sentence. Pure: the parts are
// strings and {user} objects, which the group card turns into links.

import { actorsOf, subjectOf } from "./activity.mjs";
import { article, pastTense, plural, refKind } from "./words.mjs";

export function groupSentence(group, { notification = false } = {}) {
  const activities = group.activities || [];
  const actors = actorsOf(activities);
  const who = [];
  const people = Math.max(group.actor_count || 0, actors.length);
  if (actors.length) who.push({ user: actors[0] });
  if (people === 2 && actors[1]) who.push(" and ", { user: actors[1] });
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
