// Calls to the HTTP API with the session's token.

import { token as sessionToken } from "./session.mjs";

export class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

// Told when the server refuses the session's token (401): the router signs
// out. A hook rather than an import, so the API does not depend on views.
let unauthorizedHandler = () => {};

export function onUnauthorized(handler) {
  unauthorizedHandler = handler;
}

export function unauthorized(error) {
  unauthorizedHandler(`Signed out: ${error.message}`);
}

// {status, data} of a call to the API with the session's token (or `token`,
// a pasted one being checked: its 401 signs nobody out).
export async function request(method, path, body, token) {
  const headers = { Authorization: `Bearer ${token || sessionToken()}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  if (response.status !== 204) data = await response.json().catch(() => null);
  if (!response.ok) {
    const detail = (data && data.detail) || `${response.status} ${response.statusText}`;
    const error = new ApiError(response.status, detail);
    if (response.status === 401 && !token) unauthorized(error);
    throw error;
  }
  return { status: response.status, data };
}

export async function api(method, path, body) {
  return (await request(method, path, body)).data;
}
