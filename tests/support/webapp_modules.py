"""The web app's ES modules as a browser loads them: from the page's entry
script, following each module's static imports."""

from __future__ import annotations

import re

import httpx

_ENTRY = re.compile(r'<script type="module" src="(/static/[^"]+)"></script>')
# `import {...} from "./x.mjs";` and `import "./x.mjs";`, relative paths only:
# the app imports nothing from elsewhere.
_IMPORT = re.compile(r'^import\s+(?:[^"\';]*?\s+from\s+)?"(\.{1,2}/[^"]+)";', re.MULTILINE)


def load_modules(url: str) -> dict[str, httpx.Response]:
    """Every module the page at ``url`` loads, by path, as the server answered it."""
    page = httpx.get(f"{url}/")
    entry = _ENTRY.search(page.text)
    assert entry is not None, "the page loads no module script"
    loaded: dict[str, httpx.Response] = {}
    todo = [entry[1]]
    while todo:
        path = todo.pop()
        if path in loaded:
            continue
        got = loaded[path] = httpx.get(f"{url}{path}")
        if got.status_code != 200:
            continue
        base = path.rsplit("/", 1)[0]
        for relative in _IMPORT.findall(got.text):
            todo.append(_join(base, relative))
    return loaded


def _join(base: str, relative: str) -> str:
    parts = base.split("/")
    for step in relative.split("/"):
        if step == "..":
            parts.pop()
        elif step != ".":
            parts.append(step)
    return "/".join(parts)
