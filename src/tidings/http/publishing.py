"""The route every publish takes, ``POST /v1/feeds/{group}/{key}/activities``,
served lean as the feed page is (:class:`~tidings.http.fastpath.StarletteRoute`);
and the reading of a JSON body by hand, as FastAPI reads one.

Under load, FastAPI's handling of this route (reading the body, solving
the dependencies inside two exit stacks, validating) cost a worker more CPU
than the publish itself. Here the endpoint takes the bare request and makes
the same checks in the same order, with the same errors: unparsable JSON,
then the token, then the body's fields, then the feed id, then the rights.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoint's
# annotations at runtime to build the route's dependant.
import email.message
import json
from typing import Any, TypeVar

from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from pydantic import ValidationError as ModelError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from tidings.engine import Tidings
from tidings.http import auth, models
from tidings.http.deps import feed_id
from tidings.http.fastpath import StarletteRoute
from tidings.http.problems import ERRORS
from tidings.http.responses import json_response

Model = TypeVar("Model", bound=BaseModel)

#: Nearly every client sends exactly this; anything else is read as FastAPI reads it.
_JSON = "application/json"


async def json_body(request: Request) -> Any:
    """The body as FastAPI hands a JSON body parameter to validation: None
    when empty, parsed when its content type is JSON (``application/json``
    or ``application/*+json``), else the bytes (refused by validation)."""
    raw = await request.body()
    if not raw:
        return None
    if not _is_json(request.headers.get("content-type")):
        return raw
    try:
        return json.loads(raw)  # (json, not orjson: the same errors, NaN read as FastAPI reads it)
    except json.JSONDecodeError as exc:
        raise RequestValidationError(
            [
                {
                    "type": "json_invalid",
                    "loc": ("body", exc.pos),
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": exc.msg},
                }
            ],
            body=exc.doc,
        ) from exc
    except ValueError as exc:  # not UTF-8, UTF-16 or UTF-32
        raise HTTPException(400, "There was an error parsing the body") from exc


def _is_json(content_type: str | None) -> bool:
    if content_type == _JSON:
        return True
    if not content_type:
        return False  # FastAPI's strict_content_type: a body without one is not JSON
    message = email.message.Message()
    message["content-type"] = content_type
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


def body_model(model: type[Model], value: Any) -> Model:
    """``value`` (from :func:`json_body`) as ``model``, or the errors FastAPI
    gives for a body parameter of that model."""
    if value is None:
        missing = ModelError.from_exception_data(
            "Field required", [{"type": "missing", "loc": ("body",), "input": {}}]
        ).errors(include_url=False)[0]
        raise RequestValidationError([{**missing, "input": None}])
    try:
        return model.model_validate(value, from_attributes=True)
    except ModelError as exc:
        errors = exc.errors(include_url=False)
        raise RequestValidationError(
            [{**e, "loc": ("body", *e["loc"])} for e in errors], body=value
        ) from None


async def add_activity(request: Request) -> Response:
    """Publish an activity to a feed; 200 with the stored one when `foreign_id` repeats."""
    raw = await json_body(request)
    state = request.app.state
    tokens: auth.TokenCache = state.tokens
    who = tokens.verify(request.headers.get("authorization"))
    body = body_model(models.ActivityIn, raw)
    engine: Tidings = state.engine
    params = request.path_params
    feed = feed_id(engine, params["group"], params["key"])
    auth.check_publish(who, feed, body.actor)
    auth.check_to(who, body.to, engine.access)
    # Awaited: the write joins a group commit in its own thread, and the
    # event loop serves other requests meanwhile.
    stored, created = await engine.activities.publish_async(feed, body.model_dump())
    if created:
        state.metrics.published.inc()
    return json_response(stored.to_dict(), 201 if created else 200)


#: Given to FastAPI's constructor with the fast path (see its ``route``).
route = StarletteRoute(
    "/v1/feeds/{group}/{key}/activities",
    add_activity,
    methods=["POST"],
    status_code=201,
    response_model=models.ActivityOut,
    responses={
        **ERRORS,
        200: {"model": models.ActivityOut, "description": "foreign_id already used"},
    },
    tags=["activities"],
    openapi_extra={
        "parameters": [
            {"name": "group", "in": "path", "required": True, "schema": {"type": "string"}},
            {"name": "key", "in": "path", "required": True, "schema": {"type": "string"}},
        ],
        "requestBody": {
            "required": True,
            "content": {_JSON: {"schema": {"$ref": "#/components/schemas/ActivityIn"}}},
        },
        "security": [{"HTTPBearer": []}],
    },
)
