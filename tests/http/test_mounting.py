"""The API mounted in an application of the user's own, sharing its
lifespan, served by a real uvicorn; the user's routes get the same engine."""

# No `from __future__ import annotations`: FastAPI reads the routes'
# annotations (the local `Feeds` alias) at runtime.
import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated

import httpx
import pytest
from fastapi import Depends, FastAPI

from http_server import serve
from tidings import Tidings
from tidings.core.errors import ConfigurationError
from tidings.http import create_app, engine_dependency, lifespan
from tidings.http.auth import mint
from tidings.settings import Settings

SECRET = "s" * 40


def user_app(tmp_path: Path) -> FastAPI:
    api = create_app(settings=Settings(secret=SECRET, database_url=f"sqlite:///{tmp_path}/t.db"))

    @asynccontextmanager
    async def app_lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with lifespan(api):
            yield

    app = FastAPI(lifespan=app_lifespan)
    app.mount("/feeds", api)
    Feeds = Annotated[Tidings, Depends(engine_dependency(api))]

    @app.post("/photos/{photo_id}")
    async def upload(photo_id: str, feeds: Feeds) -> dict[str, str]:
        activity = feeds.add_activity(
            "user:bob", {"actor": "bob", "verb": "post", "object": f"photo:{photo_id}"}
        )
        return {"id": activity.id}

    return app


def test_the_mounted_api_and_the_users_routes_share_one_engine(tmp_path: Path) -> None:
    token = mint(SECRET, "*", server=True)
    with serve(user_app(tmp_path)) as url:
        posted = httpx.post(f"{url}/photos/17")
        assert posted.status_code == 200, posted.text
        page = httpx.get(
            f"{url}/feeds/v1/feeds/user/bob", headers={"Authorization": f"Bearer {token}"}
        )
        assert page.status_code == 200, page.text
        assert [a["id"] for a in page.json()["results"]] == [posted.json()["id"]]


def test_the_dependency_before_the_lifespan_says_what_to_do(tmp_path: Path) -> None:
    api = create_app(settings=Settings(secret=SECRET, database_url=f"sqlite:///{tmp_path}/t.db"))
    with pytest.raises(ConfigurationError, match=r"enter tidings.http.lifespan\(api\)"):
        asyncio.run(engine_dependency(api)())
