// Reading an activity as the page shows it. Pure: Node's tests import it.

import { article, pastTense, refKind } from "./words.mjs";

// An activity's actor as a user: enriched reads give {id, handle, profile};
// a plain id (an actor no user was created for) stands for itself.
export function userOf(actor) {
  if (actor && typeof actor === "object") return actor;
  const id = String(actor);
  return { id, handle: id, profile: {} };
}

export const nameOf = (user) => (user.deleted ? "deleted user" : user.profile?.name || user.handle || user.id);

// A user known by id only (an unenriched actor): worth looking up.
export function isBare(user) {
  return !user.deleted && user.handle === user.id && !Object.keys(user.profile || {}).length;
}

// The distinct actors of some activities, newest first.
export function actorsOf(activities) {
  const actors = [];
  for (const activity of activities) {
    const user = userOf(activity.actor);
    if (!actors.some((a) => a.id === user.id)) actors.push(user);
  }
  return actors;
}

export function bodyText(activity) {
  const extra = activity.extra || {};
  for (const key of ["text", "caption", "title"]) {
    if (typeof extra[key] === "string" && extra[key]) return extra[key];
  }
  return null;
}

// What an activity is about: a comment's target (the post commented on),
// unless that is an activity (a reaction's notification names the activity
// as target and its object as object); else its object.
export function subjectOf(activity) {
  const target = activity.target;
  const about = typeof target === "string" ? target : target && target.id;
  if (activity.verb === "comment" && about && !String(about).startsWith("activity:")) return target;
  return activity.object;
}

export function describe(activity) {
  const subject = subjectOf(activity);
  if (subject && typeof subject === "object" && subject.data && typeof subject.data.name === "string") {
    return `${pastTense(activity.verb)} ${subject.data.name}`;
  }
  return `${pastTense(activity.verb)} ${article(refKind(subject))}`;
}
