"""MkDocs hook: ``reference/http.md`` is written at build time from the
OpenAPI document of the app ``tidings serve`` runs, as plain Markdown (no
script, no CDN: the page reads offline and the search indexes it). A route
or field renamed in the code is renamed here on the next build."""

from __future__ import annotations

import html
from typing import Any

_MARK = "<!-- openapi -->"
_METHODS = ("get", "post", "put", "patch", "delete")


def on_page_markdown(markdown: str, **_: Any) -> str:
    if _MARK not in markdown:
        return markdown
    return markdown.replace(_MARK, render(_document()))


def _document() -> dict[str, Any]:
    from tidings.http import create_app
    from tidings.settings import Settings

    # The app's routes and schemas do not depend on the secret or the
    # database; no engine is built until the app's lifespan starts.
    app = create_app(settings=Settings(secret="x" * 64, database_url="sqlite://"))
    document: dict[str, Any] = app.openapi()
    return document


def render(doc: dict[str, Any]) -> str:
    out: list[str] = []
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, item in doc["paths"].items():
        for method in _METHODS:
            if method in item:
                op = item[method]
                tag = (op.get("tags") or ["other"])[0]
                by_tag.setdefault(tag, []).append((method, path, op))
    for tag in sorted(by_tag):
        out.append(f"## {tag.capitalize()}\n")
        for method, path, op in by_tag[tag]:
            out.append(_operation(method, path, op))
    out.append("## Schemas\n")
    for name, schema in sorted(doc.get("components", {}).get("schemas", {}).items()):
        out.append(_schema(name, schema))
    return "\n".join(out)


def _operation(method: str, path: str, op: dict[str, Any]) -> str:
    lines = [f"### `{method.upper()} {path}`\n"]
    if op.get("summary"):
        lines.append(f"**{_text(op['summary'])}**\n")
    if op.get("description"):
        lines.append(op["description"].strip() + "\n")
    params = op.get("parameters", [])
    if params:
        lines.append("| parameter | in | type | required | description |")
        lines.append("| --- | --- | --- | --- | --- |")
        for p in params:
            lines.append(
                f"| `{p['name']}` | {p['in']} | {_type(p.get('schema', {}))} | "
                f"{'yes' if p.get('required') else 'no'} | {_cell(p.get('description', ''))} |"
            )
        lines.append("")
    body = op.get("requestBody", {}).get("content", {})
    for media, content in body.items():
        lines.append(f"Body (`{media}`): {_type(content.get('schema', {}))}\n")
    responses = op.get("responses", {})
    if responses:
        lines.append("| status | meaning | body |")
        lines.append("| --- | --- | --- |")
        for status, response in responses.items():
            schemas = [
                _type(c.get("schema", {}))
                for c in response.get("content", {}).values()
                if c.get("schema")
            ]
            shown = ", ".join(dict.fromkeys(schemas))
            lines.append(f"| {status} | {_cell(response.get('description', ''))} | {shown} |")
        lines.append("")
    return "\n".join(lines)


def _schema(name: str, schema: dict[str, Any]) -> str:
    lines = [f"### {name}\n"]
    if schema.get("description"):
        lines.append(_text(schema["description"]) + "\n")
    props = schema.get("properties", {})
    if props:
        required = set(schema.get("required", []))
        lines.append("| field | type | required | description |")
        lines.append("| --- | --- | --- | --- |")
        for field, spec in props.items():
            lines.append(
                f"| `{field}` | {_type(spec)} | {'yes' if field in required else 'no'} | "
                f"{_cell(spec.get('description', ''))} |"
            )
        lines.append("")
    elif "enum" in schema:
        lines.append("One of " + ", ".join(f"`{v}`" for v in schema["enum"]) + ".\n")
    return "\n".join(lines)


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(_type(s) for s in schema[key])
    kind = schema.get("type")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        return f"object of {_type(extra)}" if isinstance(extra, dict) and extra else "object"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    return f"{kind}" if kind else "any"


def _text(text: str) -> str:
    return " ".join(text.split())


def _cell(text: str) -> str:
    return html.escape(_text(text)).replace("|", "\\|")
