// Home: the flat timeline, with a box to post.

import { client } from "../client.mjs";
import { groupOf } from "../config.mjs";
import { h, heading, toast, uniqueId } from "../dom.mjs";
import { activityList } from "../lists.mjs";
import { me, myProfile } from "../session.mjs";

const MAX_TEXT = 500;

export function homeView(root) {
  const list = activityList({
    feed: `${groupOf("home")}:${me()}`,
    label: "Home timeline",
    empty: "Nothing here yet: follow people from their profiles, or post something.",
  });
  root.append(heading("Home"), composer(list), list.el);
  list.next();
  return () => list.close();
}

// A status id no other post of the user's has.
const statusId = () => `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;

function composer(list) {
  const textId = uniqueId("compose");
  const counter = h("span", { class: "muted counter", "aria-live": "polite" }, `0 / ${MAX_TEXT}`);
  const text = h("textarea", { id: textId, name: "text", rows: "3", maxlength: MAX_TEXT, required: true });
  text.addEventListener("input", () => (counter.textContent = `${text.value.length} / ${MAX_TEXT}`));
  text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
  const button = h("button", { type: "submit", class: "primary" }, "Post");
  const submit = async (event) => {
    event.preventDefault();
    const value = text.value.trim();
    if (!value) return;
    button.disabled = true;
    try {
      const activity = await client.publish(`${groupOf("profile")}:${me()}`, {
        actor: me(),
        verb: "post",
        object: `status:${me()}-${statusId()}`,
        extra: { text: value },
      });
      // Only what was sent: text typed while it was on its way stays.
      if (text.value.trim() === value) {
        text.value = "";
        counter.textContent = `0 / ${MAX_TEXT}`;
      }
      activity.actor = myProfile() || activity.actor;
      activity.reaction_counts = {};
      activity.own_reactions = {};
      list.prepend(activity);
    } catch (error) {
      toast(`Could not post: ${error.message}`);
    } finally {
      button.disabled = false;
      text.focus();
    }
  };
  const form = h(
    "form",
    { class: "composer", id: "composer", onsubmit: submit },
    h("label", { for: textId }, "What's happening?"),
    text,
    h("div", { class: "row" }, counter, button),
  );
  return form;
}
