// Building the page: elements, ids, messages.

// h("a", {href: "#/home", class: "x"}, "text", child): elements without innerHTML,
// so text from activities is never parsed as markup.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

let uniqueCounter = 0;

// Ids that tie a label to its input, or a card to its heading.
export const uniqueId = (prefix) => `${prefix}-${++uniqueCounter}`;

let toastTimer = null;

export function toast(message) {
  const box = document.getElementById("toast");
  box.textContent = message;
  box.classList.add("shown");
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => box.classList.remove("shown"), 4000);
}

export function alertBox(message) {
  return h("p", { class: "notice error", role: "alert" }, message);
}

export const heading = (text) => h("h1", {}, text);

export const main = () => document.getElementById("main");
