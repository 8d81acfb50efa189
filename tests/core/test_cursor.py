import pytest

from tidings.core.cursor import CursorCodec
from tidings.core.errors import InvalidCursor

codec = CursorCodec(b"secret")


@pytest.mark.parametrize("position", ["", "01HF7YAT00VXF8KTAY7ZFDY144", "user:bob", "ünï"])
def test_round_trip(position: str) -> None:
    assert codec.decode("feed:x", codec.encode("feed:x", position)) == position


def flip_last(cursor: str) -> str:
    return cursor[:-1] + ("A" if cursor[-1] != "A" else "B")


@pytest.mark.parametrize(
    ("cursor", "message"),
    [
        ("", "non-empty"),
        ("!!!", "base64url"),
        (codec.encode("feed:x", "p") + "\n", "base64url"),
        ("AAAA", "malformed"),
        ("x" * 2000, "limit is 1024"),
        (flip_last(codec.encode("feed:x", "01HF7YAT00VXF8KTAY7ZFDY144")), "modified"),
        (codec.encode("feed:other", "01HF7YAT00VXF8KTAY7ZFDY144"), "another feed"),
        (CursorCodec(b"other key").encode("feed:x", "p"), "modified"),
    ],
)
def test_bad_cursors_are_refused(cursor: str, message: str) -> None:
    with pytest.raises(InvalidCursor, match=message):
        codec.decode("feed:x", cursor)
