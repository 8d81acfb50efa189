// Firehose: a track box; matching activities appear as they are published.

import { activityCard } from "../activity-card.mjs";
import { forget } from "../cards.mjs";
import { client } from "../client.mjs";
import { alertBox, h, heading, uniqueId } from "../dom.mjs";
import { Live } from "../live.mjs";
import { plural } from "../words.mjs";

// Cards the page keeps; older ones go as new ones come.
const FIREHOSE_KEPT = 50;

export function firehoseView(root) {
  const inputId = uniqueId("track");
  const input = h("input", {
    id: inputId,
    name: "track",
    placeholder: "harbour, coffee",
    maxlength: "400",
    autocomplete: "off",
    "aria-describedby": "track-help",
  });
  const status = h("p", { class: "status muted", role: "status" }, "Not listening.");
  const list = h("ol", { class: "feed", "aria-label": "Firehose" });
  const counter = h("p", { class: "sr-only", role: "status" });
  let seen = 0;
  let live = null;
  const onEvent = (type, data) => {
    if (type === "activity.added") {
      list.prepend(h("li", {}, activityCard(data, { actions: false })));
      while (list.children.length > FIREHOSE_KEPT) {
        forget(list.lastElementChild.querySelector("article")?.dataset.id);
        list.lastElementChild.remove();
      }
      seen += 1;
      counter.textContent = `${seen} matching ${plural("activity", seen)}`;
    } else if (type === "delete") {
      for (const card of list.querySelectorAll(`article[data-id="${CSS.escape(data.id)}"]`)) {
        card.closest("li").remove();
      }
    } else if (type === "limit") {
      status.textContent = `Listening; ${data.missed ?? "some"} activities were skipped while this page fell behind.`;
    }
  };
  const onError = (error) => {
    status.textContent = "";
    status.append(alertBox(`The firehose refused: ${error.message}`));
  };
  const start = () => {
    if (live) live.close();
    list.replaceChildren();
    delete list.dataset.live;
    seen = 0;
    const track = input.value.trim();
    status.textContent = track ? `Listening for ${track}…` : "Listening to everything…";
    live = new Live((options) => client.firehose({ track: track || undefined, ...options }), onEvent, onError);
    const opened = live;
    opened.ready.then(() => {
      if (!opened.closed) list.dataset.live = "connected";
    });
  };
  root.append(heading("Firehose"), trackForm(inputId, input, start), status, counter, list);
  return () => live && live.close();
}

function trackForm(inputId, input, start) {
  return h(
    "form",
    {
      class: "track",
      onsubmit: (event) => {
        event.preventDefault();
        start();
      },
    },
    h("label", { for: inputId }, "Track"),
    input,
    h("button", { type: "submit", class: "primary" }, "Listen"),
    h(
      "p",
      { id: "track-help", class: "muted" },
      "Words or phrases, comma-separated: every activity published from now on that mentions one of them appears here. Empty: everything.",
    ),
  );
}
