"""MkDocs hook: a page whose text is ``<!-- include: PATH -->`` shows the
file at PATH (relative to the repository), so the changelog has one source."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
_MARK = re.compile(r"<!-- include: (\S+) -->")


def on_page_markdown(markdown: str, **_: Any) -> str:
    return _MARK.sub(lambda m: (ROOT / m.group(1)).read_text(), markdown)
