// Opens live events with a token the Django app minted, as a page would with
// the JS client: first another user's notifications (which must be refused),
// then the token's own. Says what happens as JSON lines on stdout; the test
// publishes once this says "open", and this exits after the first aggregate.
//
// node live_events.mjs <client module> <tidings serve URL> <token> <own feed> <other feed>
const [clientModule, url, token, own, other] = process.argv.slice(2);
const { Client } = await import(clientModule);
const say = (value) => console.log(JSON.stringify(value));
const client = new Client(url, token, { retries: 0 });

try {
  for await (const event of client.events(other)) {
    say({ unexpected: event });
    break;
  }
} catch (error) {
  say({ refused: error.status, feed: other, detail: error.detail });
}

const controller = new AbortController();
const events = client.events(own, { signal: controller.signal, onOpen: () => say({ open: own }) });
for await (const event of events) {
  say({ event });
  if (event.type === "group.updated") controller.abort();
}
