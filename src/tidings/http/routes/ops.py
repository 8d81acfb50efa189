"""Operations: health, Prometheus metrics, and a trivial endpoint for benchmarks."""

# No `from __future__ import annotations`: FastAPI reads these annotations at runtime.
from fastapi import APIRouter, Request
from starlette.responses import Response

from tidings.http import models
from tidings.http.deps import Engine
from tidings.http.metrics import CONTENT_TYPE, Metrics
from tidings.http.problems import problem
from tidings.http.responses import json_response

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=models.Health)
def healthz(request: Request) -> Response:
    """Both stores answer: 200, else 503."""
    try:
        # The engine is looked up here rather than as a dependency: an app
        # without one (not started, or shut down) is not healthy either.
        pending = request.app.state.engine.admin.health()
    except Exception as exc:
        return problem(503, f"a store does not answer: {type(exc).__name__}: {exc}")
    return json_response({"status": "ok", "pending_deliveries": pending})


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text"}},
)
def prometheus(request: Request, engine: Engine) -> Response:
    """Prometheus metrics of the whole server (every worker process): requests,
    latencies, publishes, live connections, store errors, deliveries done and
    pending, delivery and bus lag."""
    metrics: Metrics = request.app.state.metrics
    return Response(metrics.render(engine), media_type=CONTENT_TYPE)


@router.get("/v1/ping", include_in_schema=False)
async def ping() -> Response:
    """A trivial JSON endpoint: the ceiling the benchmark compares feed reads with."""
    return json_response({"pong": True})
