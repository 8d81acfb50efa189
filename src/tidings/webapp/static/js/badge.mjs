// The notification badge in the header (and the count in the tab's title).

export function setBadge(unseen) {
  const badge = document.getElementById("badge");
  document.getElementById("badge-count").textContent = String(unseen);
  badge.hidden = !unseen;
  document.title = unseen ? `(${unseen}) tidings` : "tidings";
}
