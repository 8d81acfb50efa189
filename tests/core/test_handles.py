"""Handles in the pure core: which are one (their keys), and which may not be
one handle at all (letters of scripts that do not go together)."""

from __future__ import annotations

import pytest

from tidings import ValidationError
from tidings.core.handles import CONFUSABLES, fold, mixed, skeleton
from tidings.core.users import check_handle, handle_key

#: (a handle, another, whether they are one handle). Non-ASCII letters are
#: spelt as escapes: the point is that they look like the ASCII ones.
SAME = [
    ("Alice", "ALICE", True),
    ("Alice", "AIice", True),  # a capital i reads as l
    ("alice", "a1ice", True),
    ("bob", "b0b", True),
    ("modern", "modem", True),  # rn reads as m
    ("vvolf", "wolf", True),
    ("alice", "\u0430\u04cf\u0456\u0441\u0435", True),  # all Cyrillic: a palochka i es ie
    ("admin", "\u0430\u0501\u043c\u0456\u043f", True),  # all Cyrillic: a komi-de em i pe
    ("mockba", "\u043c\u043e\u0441\u043a\u0432\u0430", True),  # Cyrillic "Moskva"
    ("TOP", "\u03a4\u039f\u03a1", True),  # Greek capitals tau omicron rho
    ("noel", "\u043d\u043e\u0451\u043b", False),  # Cyrillic en o io el: el is no l
    ("no\u00ebl", "\u043f\u043e\u0451\u04cf", True),  # ...with pe and palochka it is: "noël"
    ("alice", "alice2", False),
    ("alice", "al-ice", False),
    ("alice", "\u00e5lice", False),  # an accent makes another letter
    ("stra\u00dfe", "STRASSE", True),
    ("\u30bf\u30ca\u30ab", "\u30bf\u30ca\u30ab", True),
]


@pytest.mark.parametrize(("one", "other", "same"), SAME, ids=[f"{a}|{b}" for a, b, _ in SAME])
def test_handles_are_one_when_their_keys_are(one: str, other: str, same: bool) -> None:
    assert check_handle(one) == one
    assert check_handle(other) == other
    assert (handle_key(one) == handle_key(other)) is same


#: Handles refused as mixing scripts, with a script the error names.
MIXED = [
    ("\u0430lice", "Cyrillic"),  # a Cyrillic a among Latin letters
    ("\u0430dmin", "Cyrillic"),
    ("supp\u043ert", "Cyrillic"),
    ("p\u03b1ypal", "Greek"),
    ("\u0430\u0501min", "Latin"),  # Cyrillic a and komi-de, Latin m i n
    ("user\u0661", "Arabic"),  # an Arabic-Indic digit one
    ("\u03b1\u0430", "Cyrillic.*Greek"),  # Greek alpha, Cyrillic a
]


@pytest.mark.parametrize(("handle", "script"), MIXED)
def test_handles_of_mixed_scripts_are_refused(handle: str, script: str) -> None:
    with pytest.raises(ValidationError, match=f"mixes the scripts.*{script}") as caught:
        check_handle(handle)
    assert caught.value.field == "handle"
    assert repr(handle) in str(caught.value)


@pytest.mark.parametrize(
    "handle",
    [
        "alice_01",
        "\u041c\u043e\u0441\u043a\u0432\u0430",  # all Cyrillic
        "\u0395\u03bb\u03bb\u03ac\u03b4\u03b1",  # all Greek
        "tanaka\u7530\u4e2d",  # Latin with Han
        "\u3059\u305a\u304d\u7530\u4e2d\u30fc",  # Hiragana, Han, the prolonged sound mark
        "\uae40\ucca0\uc218",  # Hangul
        "\u0661\u0662\u0663",  # Arabic-Indic digits alone
        "caf\u00e9-2",
        "x\u0301x",  # a combining accent goes with any script
    ],
)
def test_handles_of_one_script_and_its_mixes_are_accepted(handle: str) -> None:
    assert mixed(fold(handle)) is None


def test_digits_of_two_systems_are_refused() -> None:
    # Arabic-Indic and extended Arabic-Indic (Persian) digits look alike.
    with pytest.raises(ValidationError, match="numbering systems"):
        check_handle("\u0661\u06f2")


def test_a_skeleton_is_its_own_skeleton() -> None:
    """Keys recomputed from keys (the v14 migration) are the keys handles get."""
    for one, other, _ in SAME:
        for handle in (one, other):
            key = handle_key(handle)
            assert skeleton(key) == key
            assert handle_key(key) == key
    for letter, latin in CONFUSABLES.items():
        assert skeleton(fold(letter)) == skeleton(latin)
        assert latin.isascii()
