// Grouped: the aggregated timeline.

import { groupOf } from "../config.mjs";
import { h, heading } from "../dom.mjs";
import { groupList } from "../lists.mjs";
import { me } from "../session.mjs";

export function aggregatedView(root) {
  const list = groupList({
    feed: `${groupOf("aggregated")}:${me()}`,
    label: "Grouped timeline",
    empty: "Nothing here yet: follow people from their profiles.",
  });
  root.append(
    heading("Grouped"),
    h("p", { class: "muted" }, "Your timeline, grouped by who did what on which day."),
    list.el,
  );
  list.next();
  return () => list.close();
}
