// The cards of an activity on the page, and their reaction counts.

import { entryOf, forgetActivity } from "./known.mjs";
import { plural } from "./words.mjs";

// Every card of an activity on the page (it may show in more than one place).
export function cardsOf(activityId) {
  return document.querySelectorAll(`article.card[data-id="${CSS.escape(activityId)}"]`);
}

// Drop what the page knows of an activity no card shows any more.
export function forget(activityId) {
  if (activityId && !cardsOf(activityId).length) forgetActivity(activityId);
}

export function paintReactions(card, entry) {
  const likes = entry.counts.like || 0;
  const comments = entry.counts.comment || 0;
  const liked = Boolean(entry.own.like && entry.own.like.length);
  const like = card.querySelector(":scope > .body > .actions .like");
  like.setAttribute("aria-pressed", String(liked));
  like.querySelector(".count").textContent = String(likes);
  like.setAttribute("aria-label", `Like (${likes} ${plural("like", likes)}${liked ? ", liked by you" : ""})`);
  const comment = card.querySelector(":scope > .body > .actions .comment-toggle");
  comment.querySelector(".count").textContent = String(comments);
  comment.setAttribute("aria-label", `Comments (${comments})`);
}

export function repaint(activityId) {
  const entry = entryOf(activityId);
  if (!entry) return;
  for (const card of cardsOf(activityId)) {
    paintReactions(card, entry);
  }
}
