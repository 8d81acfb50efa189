// Notifications: grouped, unread ones marked, and "Mark all read". Another
// user's show the API's 403 as a message.

import { setBadge } from "../badge.mjs";
import { client } from "../client.mjs";
import { groupOf } from "../config.mjs";
import { h, heading, toast } from "../dom.mjs";
import { groupList } from "../lists.mjs";
import { me } from "../session.mjs";

export function notificationsView(root, user = me()) {
  const mine = user === me();
  const group = groupOf("notifications");
  root.append(heading(mine ? "Notifications" : `${user}'s notifications`));
  const list = groupList({
    feed: `${group}:${user}`,
    label: "Notifications",
    empty: "No notifications yet.",
    notification: true,
  });
  list.describe = (error) =>
    error.status === 403
      ? `You can't see ${user}'s notifications: only ${user} can. (The server answered 403: ${error.message})`
      : error.message;
  if (mine) root.append(h("div", { class: "toolbar" }, markReadButton(`${group}:${user}`, list)));
  root.append(list.el);
  list.next();
  return () => list.close();
}

function markReadButton(feed, list) {
  const button = h(
    "button",
    {
      type: "button",
      id: "mark-read",
      onclick: async () => {
        button.disabled = true;
        try {
          const counts = await client.markRead(feed);
          setBadge(counts.unseen);
          for (const card of list.list.querySelectorAll("article.unread")) {
            card.classList.remove("unread");
            card.querySelector(".unread-mark")?.remove();
          }
          toast("All notifications marked read.");
        } catch (error) {
          toast(`Could not mark them read: ${error.message}`);
        } finally {
          button.disabled = false;
        }
      },
    },
    "Mark all read",
  );
  return button;
}
