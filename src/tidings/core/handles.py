"""What makes two handles look alike: scripts and confusable skeletons.

A handle is compared by its key: NFKC, case-folded, NFKC again (width,
case and composition do not make another handle), then folded to a
*skeleton* (Unicode TR39's idea, with a small table of our own,
:data:`CONFUSABLES`): letters of other scripts that look like Latin ones
become those (Cyrillic a and o, Greek omicron: ``a``, ``o``), ``i``, ``l``
and ``1`` become ``l``, ``0`` becomes ``o``, and ``rn`` and ``vv`` become
``m`` and ``w``. A handle of the Cyrillic letters a, komi de, em,
Byelorussian i and pe has the key of ``admin``; ``AIice`` (a capital i)
that of ``Alice``.

A handle's letters must also be of one script (TR39's "highly restrictive"
level): Latin, Cyrillic, Greek, Arabic... one at a time, except that Han
goes with Hiragana and Katakana, with Bopomofo or with Hangul, and Latin
with any of those (they look like nothing of each other). ASCII digits,
``_``, ``.``, ``-`` and combining accents belong to no script; other digits
to their own, and a handle's digits come from one numbering system. So
``alice`` spelt with a Cyrillic a is refused rather than compared.
"""

from __future__ import annotations

import unicodedata

#: Letters (after NFKC and case folding, without their accents) that look like
#: another: other scripts' letters like Latin ones (by their lowercase, or
#: their capital where the lowercase looks like no Latin letter), and Latin
#: and digits that read as one another. Accents stay: Cyrillic io is ``ë``.
#: Stored handle keys are made with it: a change needs a migration step that
#: recomputes them (as schema v14 does).
CONFUSABLES: dict[str, str] = {
    # Cyrillic
    "\u0430": "a",  # cyrillic small letter a
    "\u0432": "b",  # cyrillic small letter ve
    "\u0433": "r",  # cyrillic small letter ghe
    "\u0435": "e",  # cyrillic small letter ie
    "\u043a": "k",  # cyrillic small letter ka
    "\u043c": "m",  # cyrillic small letter em
    "\u043d": "h",  # cyrillic small letter en
    "\u043e": "o",  # cyrillic small letter o
    "\u043f": "n",  # cyrillic small letter pe
    "\u0440": "p",  # cyrillic small letter er
    "\u0441": "c",  # cyrillic small letter es
    "\u0442": "t",  # cyrillic small letter te
    "\u0443": "y",  # cyrillic small letter u
    "\u0445": "x",  # cyrillic small letter ha
    "\u044c": "b",  # cyrillic small letter soft sign
    "\u0455": "s",  # cyrillic small letter dze
    "\u0456": "i",  # cyrillic small letter byelorussian-ukrainian i
    "\u0458": "j",  # cyrillic small letter je
    "\u04bb": "h",  # cyrillic small letter shha
    "\u04cf": "l",  # cyrillic small letter palochka
    "\u0501": "d",  # cyrillic small letter komi de
    "\u051b": "q",  # cyrillic small letter qa
    "\u051d": "w",  # cyrillic small letter we
    "\u04af": "y",  # cyrillic small letter straight u
    "\u0475": "v",  # cyrillic small letter izhitsa
    # Greek
    "\u03b1": "a",  # greek small letter alpha
    "\u03b2": "b",  # greek small letter beta
    "\u03b3": "y",  # greek small letter gamma
    "\u03b5": "e",  # greek small letter epsilon
    "\u03b6": "z",  # greek small letter zeta
    "\u03b7": "n",  # greek small letter eta
    "\u03b9": "i",  # greek small letter iota
    "\u03ba": "k",  # greek small letter kappa
    "\u03bc": "u",  # greek small letter mu
    "\u03bd": "v",  # greek small letter nu
    "\u03bf": "o",  # greek small letter omicron
    "\u03c1": "p",  # greek small letter rho
    "\u03c4": "t",  # greek small letter tau
    "\u03c5": "u",  # greek small letter upsilon
    "\u03c7": "x",  # greek small letter chi
    "\u03c9": "w",  # greek small letter omega
    "\u03f3": "j",  # greek letter yot
    # Armenian
    "\u0585": "o",  # armenian small letter oh
    "\u057d": "u",  # armenian small letter seh
    "\u0570": "h",  # armenian small letter ho
    "\u0578": "n",  # armenian small letter vo
    "\u0581": "g",  # armenian small letter co
    "\u0566": "q",  # armenian small letter za
    # Latin look-alikes of Latin letters, and digits
    "\u0131": "i",  # latin small letter dotless i
    "\u0269": "i",  # latin small letter iota
    "\u0251": "a",  # latin small letter alpha
    "\u0261": "g",  # latin small letter script g
    "\u0237": "j",  # latin small letter dotless j
    "0": "o",
    "1": "l",
    "i": "l",
}
#: Pairs that read as one letter, folded after the table.
PAIRS = (("rn", "m"), ("vv", "w"))

# Byelorussian and dotless i map to "i", which maps on to "l": the table is
# applied to its own values, so one pass does all.
_ONCE = str.maketrans(CONFUSABLES)
_FOLD = str.maketrans({k: v.translate(_ONCE) for k, v in CONFUSABLES.items()})

#: Scripts that may share a handle (TR39 "highly restrictive"); any one script
#: alone may too.
MIXES = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
)
#: Unicode names that start otherwise than with their script's.
_ALIASES = {"CJK": "HAN", "IDEOGRAPHIC": "HAN"}
_NEUTRAL = frozenset("0123456789_.-")


def fold(handle: str) -> str:
    """NFKC, case-folded, NFKC again (case folding can undo a normalisation,
    e.g. for ``ǅ``): ``Alice``, ``ALICE`` and a full-width ``Alice`` agree."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", handle).casefold())


def skeleton(folded: str) -> str:
    """What a :func:`fold`-ed handle looks like: confusables to one letter
    (:data:`CONFUSABLES`, :data:`PAIRS`). A skeleton is its own skeleton."""
    base = unicodedata.normalize("NFD", folded).translate(_FOLD)
    for pair, one in PAIRS:
        base = base.replace(pair, one)
    return unicodedata.normalize("NFC", base)


def script(ch: str) -> str | None:
    """The script of a character as its Unicode name starts (``CYRILLIC SMALL
    LETTER A``: ``CYRILLIC``); None for ASCII digits, ``_ . -`` and combining
    accents, which go with any."""
    if ch in _NEUTRAL:
        return None
    name = unicodedata.name(ch, "UNNAMED")
    if name.startswith("COMBINING ") and unicodedata.category(ch) == "Mn":
        return None
    words = name.split(" ")
    # "EXTENDED ARABIC-INDIC DIGIT", "KATAKANA-HIRAGANA PROLONGED SOUND MARK"
    word = (words[1] if words[0] == "EXTENDED" and len(words) > 1 else words[0]).split("-")[0]
    return _ALIASES.get(word, word)


def mixed(folded: str) -> str | None:
    """Why a :func:`fold`-ed handle may not be one (its letters of scripts that
    do not go together, or digits of two systems); None when it may."""
    first: dict[str, str] = {}
    for ch in folded:
        first.setdefault(script(ch) or "", ch)
    first.pop("", None)
    if len(first) > 1 and not any(first.keys() <= mix for mix in MIXES):
        named = ", ".join(f"{s.title()} (U+{ord(first[s]):04X})" for s in sorted(first))
        return f"mixes the scripts {named}: a handle's letters must be of one script"
    zeros = {ord(c) - unicodedata.decimal(c) for c in folded if unicodedata.category(c) == "Nd"}
    if len(zeros) > 1:
        return "mixes digits of different numbering systems"
    return None
