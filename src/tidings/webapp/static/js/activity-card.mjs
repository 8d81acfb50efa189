// An activity as a card: who did what, its text, likes and comments.

import { bodyText, describe, userOf } from "./activity.mjs";
import { paintReactions } from "./cards.mjs";
import { commentForm, toggleComments } from "./comments.mjs";
import { h, uniqueId } from "./dom.mjs";
import { remember } from "./known.mjs";
import { toggleLike } from "./reactions.mjs";
import { timeEl } from "./time.mjs";
import { avatar, lookUpUser, userLink, worthLookingUp } from "./users.mjs";
import { formatNumber } from "./words.mjs";

// options.score shows the ranked score; options.actions === false leaves
// out likes and comments (the firehose: no counts come with its
// activities, nor reaction events after).
export function activityCard(activity, options = {}) {
  const entry = remember(activity);
  const user = userOf(activity.actor);
  const headId = uniqueId("head");
  const text = bodyText(activity);
  const actions = options.actions !== false;
  const card = h(
    "article",
    { class: "card", dataset: { id: activity.id }, tabindex: "0", "aria-labelledby": headId },
    avatar(user),
    h(
      "div",
      { class: "body" },
      h(
        "p",
        { class: "head", id: headId },
        userLink(user),
        " ",
        h("span", { class: "handle" }, `@${user.handle || user.id}`),
        " ",
        h("span", { class: "verb" }, describe(activity)),
        " · ",
        timeEl(activity.time),
      ),
      text ? h("p", { class: "text" }, text) : null,
      options.score ? scoreBadge(activity) : null,
      actions ? reactionParts(activity) : null,
    ),
  );
  if (actions) paintReactions(card, entry);
  if (worthLookingUp(user)) {
    lookUpUser(user.id).then((found) => {
      if (found) card.querySelector(".head .handle").textContent = `@${found.handle}`;
    });
  }
  return card;
}

// The like and comment buttons, and the comments they open.
function reactionParts(activity) {
  const commentsId = uniqueId("comments");
  const likeButton = h(
    "button",
    { type: "button", class: "like", "aria-pressed": "false", onclick: () => toggleLike(activity.id) },
    h("span", { "aria-hidden": "true" }, "♥ "),
    "Like ",
    h("span", { class: "count" }, "0"),
  );
  const commentButton = h(
    "button",
    {
      type: "button",
      class: "comment-toggle",
      "aria-expanded": "false",
      "aria-controls": commentsId,
      onclick: (event) => toggleComments(event.currentTarget.closest("article"), activity),
    },
    "Comment ",
    h("span", { class: "count" }, "0"),
  );
  return [
    h("div", { class: "actions" }, likeButton, commentButton),
    h(
      "section",
      { class: "comments", id: commentsId, hidden: true, "aria-label": "Comments" },
      h("ol", { class: "comment-list" }),
      commentForm(activity),
    ),
  ];
}

function scoreBadge(activity) {
  const tipId = uniqueId("explain");
  const rows = Object.entries(activity.explain || {}).map(([name, value]) =>
    h("tr", {}, h("th", { scope: "row" }, name), h("td", {}, formatNumber(value))),
  );
  return h(
    "div",
    { class: "score-wrap" },
    h(
      "button",
      { type: "button", class: "score", "aria-describedby": tipId },
      `score ${formatNumber(activity.score)}`,
    ),
    h(
      "div",
      { class: "tip", role: "tooltip", id: tipId },
      h("p", {}, "Why it ranks here"),
      h("table", {}, h("tbody", {}, rows)),
    ),
  );
}
