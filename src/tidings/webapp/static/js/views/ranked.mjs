// Ranked: the timeline in ranked order, each activity with its score.

import { groupOf } from "../config.mjs";
import { h, heading, toast } from "../dom.mjs";
import { activityList } from "../lists.mjs";
import { me } from "../session.mjs";
import { newActivities } from "../words.mjs";

export function rankedView(root) {
  const list = activityList({
    feed: `${groupOf("ranked")}:${me()}`,
    options: { explain: true },
    label: "Ranked timeline",
    empty: "Nothing to rank yet: follow people from their profiles.",
    score: true,
    liveInsert: false, // a new activity's place depends on its score: re-rank to see it
  });
  list.banner.title = "Rank the timeline again";
  list.bannerText = () => `${newActivities(list.pending.length)}: rank again`;
  list.onPage = (page) => {
    if (page.renewed) toast("The ranking was renewed; the pages before were ranked afresh.");
  };
  root.append(
    heading("Ranked"),
    h("p", { class: "muted" }, "Your timeline ordered by the ranking; hover or focus a score for why."),
    list.el,
  );
  list.next();
  return () => list.close();
}
