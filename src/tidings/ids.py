"""Activity ids: 128 bits that sort by time and never collide.

Layout (big-endian): 48 bits of milliseconds since the Unix epoch, then 80
random bits. The text form is 26 characters of Crockford base32 (the ULID
alphabet), so ids sort the same as text, as bytes and by time. Eighty random
bits keep ids unique across processes that mint many ids in the same
millisecond: a collision needs ~2^40 ids in one millisecond.

Stores that care about memory (Redis) keep the 16-byte form; everything else
uses text.
"""

from __future__ import annotations

import os
import re

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
ID_LENGTH = 26
MAX_MS = (1 << 48) - 1
# Ten bits at a time: 13 table lookups turn 128 bits (plus two leading zero
# bits) into 26 characters, several times faster than a 5-bit loop.
_PAIRS = [ALPHABET[i >> 5] + ALPHABET[i & 31] for i in range(1024)]
_PAIR_VALUES = {pair: i for i, pair in enumerate(_PAIRS)}
_SHIFTS = tuple(range(120, -1, -10))
_ID_RE = re.compile(rf"^[0-7][{ALPHABET}]{{25}}$")


def new_id(ms: int) -> str:
    """A fresh id for an activity whose time is ``ms`` milliseconds since the epoch."""
    if not 0 <= ms <= MAX_MS:
        raise ValueError(f"time out of range for an id: {ms} ms (0..{MAX_MS})")
    return encode(ms.to_bytes(6, "big") + os.urandom(10))


def encode(raw: bytes) -> str:
    """16 raw bytes to the 26-character text form."""
    n = int.from_bytes(raw, "big")
    return "".join([_PAIRS[(n >> shift) & 1023] for shift in _SHIFTS])


def decode(text: str) -> bytes:
    """The 26-character text form to 16 raw bytes. Raises ValueError when malformed."""
    if not is_valid(text):
        raise ValueError(f"not an activity id: {text!r}")
    n = 0
    for i in range(0, ID_LENGTH, 2):
        n = (n << 10) | _PAIR_VALUES[text[i : i + 2]]
    return n.to_bytes(16, "big")


def is_valid(text: str) -> bool:
    return bool(_ID_RE.match(text))


def id_ms(text: str) -> int:
    """The millisecond timestamp an id carries."""
    return int.from_bytes(decode(text)[:6], "big")


def floor_id(ms: int) -> str:
    """The smallest possible id at ``ms``: every id minted at or after ``ms`` sorts >= it."""
    return encode(max(0, min(ms, MAX_MS)).to_bytes(6, "big") + bytes(10))
