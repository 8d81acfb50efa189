// The page's client of the API: the JS client (tidings.mjs, the very file
// of the npm package clients/js), with the signed-in user's token.

import { Client, TidingsError } from "./tidings.mjs";
import { signedIn, token } from "./session.mjs";

export { Client, TidingsError };

// Told when the server refuses the session's token (401): the router signs
// out. A hook rather than an import, so this module does not depend on views.
let unauthorizedHandler = () => {};

export function onUnauthorized(handler) {
  unauthorizedHandler = handler;
}

export function unauthorized(error) {
  unauthorizedHandler(`Signed out: ${error.message}`);
}

// Same origin: the page's own server. The token is read per request, so a
// new session needs no new client.
export const client = new Client("", () => (signedIn() ? token() : null), {
  onError: (error) => {
    if (error.status === 401) unauthorized(error);
  },
});

// A client of no session: signing in (a pasted token's 401 signs nobody out).
export const anonymous = (pasted = null) => new Client("", pasted);
