"""SSE subscribers that resume where they left off, on another serve process.

Each holds one feed's stream (``GET /v1/feeds/{group}/{key}/events``) on a
thread of its own. When the stream ends or its server goes away, it opens
the stream again on the next serve process with ``Last-Event-ID`` (the last
``id:`` it read), as a browser's EventSource does, and counts the resume.
What it records: the activities of the ``activity.added`` events it read,
those read twice, and the ``resync`` events (a gap the server announced).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import orjson

from tidings.http.auth import mint

#: How often a blocked read wakes to see whether it should stop.
READ_TIMEOUT = 0.5


@dataclass
class Seen:
    """What one subscriber read."""

    feed: str
    added: list[str] = field(default_factory=list)
    repeated: int = 0
    resyncs: int = 0
    resumed: int = 0
    #: ``serve`` URL each stream was opened on, in order.
    opened_on: list[str] = field(default_factory=list)


class Subscriber:
    def __init__(self, feed: str, urls: list[str], secret: str, *, first: int = 0) -> None:
        self.seen = Seen(feed)
        self.urls = urls
        self.token = mint(secret, "*", server=True)
        self.last_id: str | None = None
        self._at = first
        self._stop = threading.Event()
        self._open = threading.Event()
        self._ids: set[str] = set()
        self._thread = threading.Thread(target=self._run, name=f"sse {feed}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wait_open(self, timeout: float) -> bool:
        return self._open.wait(timeout)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            url = self.urls[self._at % len(self.urls)]
            with contextlib.suppress(OSError):  # refused, reset: the next serve process
                self._listen(url)
            if self._stop.is_set():
                return
            self._at += 1
            self.seen.resumed += 1
            time.sleep(0.1)

    def _listen(self, url: str) -> None:
        parts = urlsplit(url)
        group, key = self.seen.feed.split(":", 1)
        resume = f"Last-Event-ID: {self.last_id}\r\n" if self.last_id else ""
        request = (
            f"GET /v1/feeds/{group}/{key}/events HTTP/1.1\r\nHost: {parts.hostname}\r\n"
            f"Authorization: Bearer {self.token}\r\nAccept: text/event-stream\r\n{resume}\r\n"
        )
        with socket.create_connection((parts.hostname, parts.port or 80), timeout=5) as sock:
            sock.sendall(request.encode())
            sock.settimeout(READ_TIMEOUT)
            lines = _Lines(sock, self._stop)
            status = lines.next()
            if status is None or b" 200 " not in status:
                time.sleep(0.5)  # (a 503 while a store is down, say): try again
                return
            while lines.next() not in (b"", None):  # the headers
                pass
            self.seen.opened_on.append(url)
            self._read(lines)

    def _read(self, lines: _Lines) -> None:
        kind = ""
        while (line := lines.next()) is not None:
            if line.startswith(b": connected"):
                self._open.set()
            elif line.startswith(b"id: "):
                self.last_id = line[4:].decode()
            elif line.startswith(b"event: "):
                kind = line[7:].decode()
                self.seen.resyncs += kind == "resync"
            elif line.startswith(b"data: ") and kind == "activity.added":
                self._added(orjson.loads(line[6:])["id"])

    def _added(self, activity_id: str) -> None:
        if activity_id in self._ids:
            self.seen.repeated += 1
            return
        self._ids.add(activity_id)
        self.seen.added.append(activity_id)


class _Lines:
    """Lines of an HTTP/1.1 chunked stream, their chunk framing dropped.

    SSE's own lines never look like chunk sizes here: every SSE line the
    server writes starts with ``id:``, ``event:``, ``data:`` or ``:``.
    """

    def __init__(self, sock: socket.socket, stop: threading.Event) -> None:
        self.sock = sock
        self.stop = stop
        self.buffer = b""
        self.in_body = False

    def next(self) -> bytes | None:
        """The next line (without its end), or None once the stream ended or
        the subscriber stops."""
        while True:
            line = self._raw()
            if line is None:
                return None
            if not self.in_body:
                if line == b"":
                    self.in_body = True
                return line
            if _chunk_size(line) is not None:
                continue
            return line

    def _raw(self) -> bytes | None:
        while b"\n" not in self.buffer:
            if self.stop.is_set():
                return None
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            if not data:
                return None
            self.buffer += data
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.rstrip(b"\r")


def _chunk_size(line: bytes) -> int | None:
    try:
        return int(line, 16)
    except ValueError:
        return None
