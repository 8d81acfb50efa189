"""The JSON response every route but the fast path's flat read sends."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response


def json_response(body: Any, status: int = 200) -> Response:
    """``body`` serialised by orjson: FastAPI's ``jsonable_encoder`` is ~100x slower
    for a page of 25; each route's ``response_model`` still documents the shape."""
    return Response(
        orjson.dumps(body, option=orjson.OPT_UTC_Z), status, media_type="application/json"
    )
