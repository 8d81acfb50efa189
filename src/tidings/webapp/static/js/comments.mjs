// An activity card's comments: the list (loaded when opened) and the reply form.

import { userOf } from "./activity.mjs";
import { cardsOf, repaint } from "./cards.mjs";
import { client } from "./client.mjs";
import { groupOf } from "./config.mjs";
import { h, toast, uniqueId } from "./dom.mjs";
import { countOwnAdded, entryOf } from "./known.mjs";
import { notifyTargets } from "./notify.mjs";
import { me } from "./session.mjs";
import { timeEl } from "./time.mjs";
import { userLink } from "./users.mjs";

const MAX_TEXT = 500;

export function commentForm(activity) {
  const inputId = uniqueId("comment");
  const input = h("input", { id: inputId, name: "text", maxlength: MAX_TEXT, required: true, autocomplete: "off" });
  const submit = async (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    input.disabled = true;
    try {
      const data = await client.addReaction(activity.id, {
        kind: "comment",
        user: me(),
        data: { text },
        to: notifyTargets(activity, me(), groupOf("notifications")),
      });
      countOwnAdded(entryOf(activity.id), "comment", data);
      appendComment(activity.id, data);
      repaint(activity.id);
      input.value = "";
    } catch (error) {
      toast(`Could not comment: ${error.message}`);
    } finally {
      input.disabled = false;
      input.focus();
    }
  };
  return h(
    "form",
    { class: "comment-form", onsubmit: submit },
    h("label", { for: inputId }, "Your comment"),
    input,
    h("button", { type: "submit" }, "Reply"),
  );
}

function commentItem(reaction) {
  const user = userOf(reaction.user);
  return h(
    "li",
    { dataset: { reaction: reaction.id } },
    userLink(user),
    " ",
    h("span", {}, (reaction.data && reaction.data.text) || ""),
    " · ",
    timeEl(reaction.created_at),
  );
}

// A new comment, on top of every open comment list of the activity.
export function appendComment(activityId, reaction) {
  for (const card of cardsOf(activityId)) {
    const list = card.querySelector(".comment-list");
    const section = card.querySelector(".comments");
    if (section.hidden || list.querySelector(`[data-reaction="${CSS.escape(reaction.id)}"]`)) continue;
    list.prepend(commentItem(reaction));
  }
}

export async function toggleComments(card, activity) {
  const section = card.querySelector(".comments");
  const button = card.querySelector(".comment-toggle");
  const open = section.hidden;
  section.hidden = !open;
  button.setAttribute("aria-expanded", String(open));
  if (!open) return;
  const list = section.querySelector(".comment-list");
  list.replaceChildren(h("li", { class: "muted" }, "Loading comments…"));
  try {
    const page = await client.reactions(activity.id, { kind: "comment", limit: 10 });
    list.replaceChildren(...page.results.map(commentItem));
    if (!page.results.length) list.replaceChildren(h("li", { class: "muted" }, "No comments yet."));
  } catch (error) {
    list.replaceChildren(h("li", { class: "error" }, `Could not load comments: ${error.message}`));
  }
  section.querySelector("input").focus();
}
