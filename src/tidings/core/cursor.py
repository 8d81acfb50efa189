"""Opaque, tamper-evident pagination cursors.

A cursor names a position (the last item a page returned) within a context
(the feed or follow list it was made for). It is MAC'd with the server
secret, so a cursor that was edited, truncated or made for another feed is
refused with a clear error instead of silently paging somewhere else.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re

from tidings.core.errors import InvalidCursor
from tidings.core.limits import MAX_CURSOR_LENGTH

_VERSION = b"\x01"
_MAC_BYTES = 10
_B64URL = re.compile(r"[A-Za-z0-9_-]+")  # fullmatch: `$` allows a trailing newline


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class CursorCodec:
    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _mac(self, context: str, payload: bytes) -> bytes:
        msg = context.encode() + b"\x00" + payload
        return hmac.new(self._secret, msg, hashlib.sha256).digest()[:_MAC_BYTES]

    def encode(self, context: str, position: str) -> str:
        payload = position.encode()
        return _b64(_VERSION + self._mac(context, payload) + payload)

    def decode(self, context: str, cursor: str) -> str:
        if not isinstance(cursor, str) or not cursor:
            raise InvalidCursor("cursor must be a non-empty string", field="cursor")
        if len(cursor) > MAX_CURSOR_LENGTH:
            raise InvalidCursor(
                f"cursor is {len(cursor)} characters; the limit is {MAX_CURSOR_LENGTH}",
                field="cursor",
            )
        try:
            if not _B64URL.fullmatch(cursor):
                raise ValueError
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except (binascii.Error, ValueError):
            raise InvalidCursor("cursor is not valid base64url", field="cursor") from None
        if _b64(raw) != cursor:  # unused low bits set: not a cursor we made
            raise InvalidCursor("cursor was modified", field="cursor")
        if len(raw) < 1 + _MAC_BYTES or raw[:1] != _VERSION:
            raise InvalidCursor("cursor is malformed or from another version", field="cursor")
        mac, payload = raw[1 : 1 + _MAC_BYTES], raw[1 + _MAC_BYTES :]
        if not hmac.compare_digest(mac, self._mac(context, payload)):
            raise InvalidCursor("cursor was modified or was made for another feed", field="cursor")
        try:
            return payload.decode()
        except UnicodeDecodeError:
            raise InvalidCursor("cursor is malformed", field="cursor") from None
