// A group of activities as a card ("bob and 2 others liked 3 photos").

import { actorsOf, bodyText } from "./activity.mjs";
import { h, uniqueId } from "./dom.mjs";
import { groupSentence } from "./group-sentence.mjs";
import { timeEl } from "./time.mjs";
import { avatar, userLink } from "./users.mjs";

export function groupCard(group, options = {}) {
  const activities = group.activities || [];
  const actors = actorsOf(activities);
  const headId = uniqueId("group");
  const unread = options.notification && group.is_read === false;
  const texts = activities.map(bodyText).filter(Boolean).slice(0, 3);
  const sentence = groupSentence(group, options).map((part) =>
    typeof part === "string" ? part : userLink(part.user),
  );
  return h(
    "article",
    {
      class: `card group${unread ? " unread" : ""}`,
      dataset: { group: group.group },
      tabindex: "0",
      "aria-labelledby": headId,
    },
    h("div", { class: "stack" }, actors.slice(0, 3).map((user) => avatar(user, 32))),
    h(
      "div",
      { class: "body" },
      h(
        "p",
        { class: "head", id: headId },
        unread ? h("span", { class: "sr-only unread-mark" }, "Unread: ") : null,
        sentence,
        " · ",
        timeEl(group.updated_at),
      ),
      texts.length ? h("ul", { class: "snippets" }, texts.map((text) => h("li", {}, text))) : null,
    ),
  );
}
