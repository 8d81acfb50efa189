"""Activity ids: 128 bits that sort by time and never collide.

Layout (big-endian): 48 bits of milliseconds since the Unix epoch, then 80
random bits. The text form is 32 lowercase hex characters, so ids sort the
same as text, as bytes and by time. Eighty random bits keep ids unique across
processes that mint many ids in the same millisecond: a collision needs
~2^40 ids in one millisecond.

Hex rather than a denser alphabet because a page read converts every id it
returns, and ``bytes.hex`` does a whole page in one C call.

Stores that care about memory (Redis) keep the 16-byte form; everything else
uses text.
"""

from __future__ import annotations

import os
import re

ID_LENGTH = 32
MAX_MS = (1 << 48) - 1
_ID_RE = re.compile(r"[0-9a-f]{32}")  # fullmatch: `$` allows a trailing newline


def new_id(ms: int) -> str:
    """A fresh id for an activity whose time is ``ms`` milliseconds since the epoch."""
    if not 0 <= ms <= MAX_MS:
        raise ValueError(f"time out of range for an id: {ms} ms (0..{MAX_MS})")
    return (ms.to_bytes(6, "big") + os.urandom(10)).hex()


def encode(raw: bytes) -> str:
    """16 raw bytes to the text form."""
    return raw.hex()


def encode_many(raw: bytes) -> list[str]:
    """Concatenated 16-byte ids to text ids, in the same order."""
    text = raw.hex()
    return [text[i : i + ID_LENGTH] for i in range(0, len(text), ID_LENGTH)]


def decode(text: str) -> bytes:
    """The text form to 16 raw bytes. Raises ValueError when malformed."""
    if not is_valid(text):
        raise ValueError(f"not an activity id: {text[:64]!r}")
    return bytes.fromhex(text)


def is_valid(text: object) -> bool:
    return isinstance(text, str) and bool(_ID_RE.fullmatch(text))


def id_ms(text: str) -> int:
    """The millisecond timestamp an id carries."""
    return int.from_bytes(decode(text)[:6], "big")


def after(text: str) -> str:
    """The smallest id greater than ``text`` (same millisecond unless it overflows)."""
    return f"{int(text, 16) + 1:032x}"


def floor_id(ms: int) -> str:
    """The smallest possible id at ``ms``: every id minted at or after ``ms`` sorts >= it."""
    return encode(max(0, min(ms, MAX_MS)).to_bytes(6, "big") + bytes(10))
