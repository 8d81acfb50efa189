// One server-sent event frame (the text between blank lines), parsed.
// Pure: Node's tests import it.

// {type, id, data, connected}: `data` is the parsed JSON or undefined when
// the frame has none (a comment, a keep-alive) or it is not JSON;
// `connected` marks the server's ": connected" comment that opens a stream.
export function parseFrame(text) {
  let type = "message";
  let id = null;
  let connected = false;
  const data = [];
  for (const line of text.split("\n")) {
    if (line.startsWith(":")) {
      if (line.startsWith(": connected")) connected = true;
      continue;
    }
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") type = value;
    else if (field === "id") id = value;
    else if (field === "data") data.push(value);
  }
  let parsed;
  if (data.length) {
    try {
      parsed = JSON.parse(data.join("\n"));
    } catch {
      parsed = undefined;
    }
  }
  return { type, id: data.length ? id : null, data: parsed, connected };
}
