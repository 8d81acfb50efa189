// A feed's (or the firehose's) server-sent events, read with fetch rather
// than EventSource, which cannot send the Authorization header.

import { ApiError, unauthorized } from "./api.mjs";
import { token } from "./session.mjs";
import { parseFrame } from "./sse.mjs";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Reconnects with Last-Event-ID, backing off; stops on 400/401/403/404/422,
// which retrying would not change.
export class Live {
  constructor(path, onEvent, onError) {
    this.path = path;
    this.onEvent = onEvent;
    this.onError = onError || (() => {});
    this.lastId = null;
    this.closed = false;
    this.controller = null;
    this.ready = new Promise((resolve) => (this.opened = resolve));
    this.run();
  }

  async run() {
    let delay = 500;
    while (!this.closed) {
      this.controller = new AbortController();
      try {
        const headers = { Authorization: `Bearer ${token()}`, Accept: "text/event-stream" };
        if (this.lastId) headers["Last-Event-ID"] = this.lastId;
        const response = await fetch(this.path, {
          headers,
          signal: this.controller.signal,
          cache: "no-store",
        });
        if (!response.ok) {
          const data = await response.json().catch(() => null);
          const error = new ApiError(response.status, (data && data.detail) || response.statusText);
          this.onError(error);
          if (response.status === 401) {
            this.stopped?.();
            unauthorized(error);
            return;
          }
          if ([400, 403, 404, 422].includes(response.status)) return;
          throw error;
        }
        delay = 500;
        await this.read(response);
      } catch {
        if (this.closed) return;
      }
      await sleep(delay);
      delay = Math.min(delay * 2, 10_000);
    }
  }

  async read(response) {
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        this.frame(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
  }

  frame(text) {
    const frame = parseFrame(text);
    if (frame.connected) this.opened();
    if (frame.id) this.lastId = frame.id;
    if (frame.data !== undefined) this.onEvent(frame.type, frame.data);
  }

  close() {
    this.closed = true;
    if (this.controller) this.controller.abort();
  }
}
