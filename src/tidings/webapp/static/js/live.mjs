// A feed's (or the firehose's) live events as the page shows them: the
// client's stream (which reopens itself after a drop, from the last event
// id), read until closed or refused.

export class Live {
  // `open(options)` opens the stream: `client.events(feed, {...options})`.
  constructor(open, onEvent, onError) {
    this.onEvent = onEvent;
    this.onError = onError || (() => {});
    this.closed = false;
    this.controller = new AbortController();
    this.ready = new Promise((resolve) => (this.opened = resolve));
    this.run(open);
  }

  async run(open) {
    try {
      const stream = open({ signal: this.controller.signal, onOpen: () => this.opened() });
      for await (const event of stream) this.onEvent(event.type, event.data);
    } catch (error) {
      if (this.closed) return;
      // A refusal (retrying would not change it); a 401 has signed out
      // already (the client's onError).
      this.onError(error);
      if (error.status === 401) this.stopped?.();
    }
  }

  close() {
    this.closed = true;
    this.controller.abort();
  }
}
