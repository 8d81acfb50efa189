// Signing in: on a development server, pick a user (the server mints their
// token); elsewhere, paste a token the application minted.

import { anonymous, TidingsError } from "../client.mjs";
import { config } from "../config.mjs";
import { alertBox, h, heading, uniqueId } from "../dom.mjs";
import { avatar } from "../users.mjs";

// `onSignedIn({user, token})` starts the session; a callback, so this view
// does not depend on the router that shows it.
export function signInView(root, notice, onSignedIn) {
  root.append(heading("Sign in"));
  if (notice) root.append(alertBox(notice));
  const error = h("div", { role: "alert", class: "sign-in-error" });
  if (config().devSignIn) root.append(...pickAUser(error, onSignedIn));
  else root.append(...pasteAToken(error, onSignedIn));
  root.append(error);
  return () => {};
}

function pickAUser(error, onSignedIn) {
  const pick = (user) => devSignIn(user, error, onSignedIn);
  const people = config().users.map((user) =>
    h(
      "li",
      {},
      h(
        "button",
        { type: "button", class: "person", dataset: { user: user.id }, onclick: () => pick(user.id) },
        avatar({ id: user.id, profile: {} }, 40),
        h("span", {}, h("strong", {}, user.name), h("span", { class: "handle" }, ` @${user.handle} · ${user.id}`)),
      ),
    ),
  );
  const inputId = uniqueId("user");
  const input = h("input", { id: inputId, name: "user", required: true, autocomplete: "username" });
  const form = h(
    "form",
    {
      class: "inline",
      onsubmit: (event) => {
        event.preventDefault();
        pick(input.value.trim());
      },
    },
    h("label", { for: inputId }, "Or any user id"),
    input,
    h("button", { type: "submit", class: "primary" }, "Sign in"),
  );
  return [
    h("p", {}, "This is a development server: pick a demo user to act as. (A production server never mints tokens like this.)"),
    h("ul", { class: "people" }, people),
    form,
  ];
}

function pasteAToken(error, onSignedIn) {
  const inputId = uniqueId("token");
  const input = h("textarea", { id: inputId, name: "token", rows: "4", required: true, spellcheck: "false" });
  const form = h(
    "form",
    {
      onsubmit: async (event) => {
        event.preventDefault();
        await tokenSignIn(input.value.trim(), error, onSignedIn);
      },
    },
    h("label", { for: inputId }, "Token"),
    input,
    h("button", { type: "submit", class: "primary" }, "Sign in"),
  );
  return [h("p", {}, "Paste a user token your application minted for you (", h("code", {}, "tidings token USER"), ")."), form];
}

// The development server's POST /app/session: JSON, as that route accepts only.
async function devSignIn(user, errorBox, onSignedIn) {
  errorBox.textContent = "";
  try {
    const { data } = await anonymous().request("POST", "/app/session", { body: { user } });
    await onSignedIn({ user: data.user, token: data.token });
  } catch (error) {
    errorBox.textContent = `Could not sign in: ${error.message}`;
  }
}

async function tokenSignIn(token, errorBox, onSignedIn) {
  errorBox.textContent = "";
  try {
    const { data } = await anonymous(token).request("GET", "/app/session");
    if (data.server) throw new TidingsError(400, { detail: "that is a server token; sign in with a user token" });
    await onSignedIn({ user: data.user, token });
  } catch (error) {
    errorBox.textContent = `Could not sign in: ${error.message}`;
  }
}
