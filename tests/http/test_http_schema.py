"""Schemathesis against the live service's /openapi.json: no 5xx, and every response
matches the schema it documents.

Two runs over every operation: one with the values exactly as generated (most
feed ids are then invalid, which exercises the error paths), and one where
path parameters are mapped onto real feeds and activities so the success
paths answer too. Bounded and derandomised, so CI runs are stable.

The schema is built from the app at import time, because schemathesis's lazy
loader (``schemathesis.pytest.from_fixture``) fails on pytest 9.2 (it sets
``Function._nodeid``, which pytest no longer has); the first test proves the
live server serves exactly this schema.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from http_server import SECRET, LiveApi, live_api
from tidings import Settings
from tidings.http import create_app

GROUPS = ("user", "timeline", "notification")
KEYS = ("alice", "bob", "carol")
CHECKS = [not_a_server_error, response_schema_conformance]
#: 25 cases per operation and run (each an HTTP call; ~40 operations, two
#: runs): 50 cost the suite's two workers about a minute more, for the
#: suite's 10-minute budget. Derandomised, so every run tries the same cases.
SETTINGS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveApi]:
    """The service over the SQL store, with a few feeds, follows and activities."""
    tmp: Path = tmp_path_factory.mktemp("http-schema")
    with pytest.MonkeyPatch.context() as mp:  # as conftest's _isolated_settings, module-wide
        for name in list(os.environ):
            if name.startswith("TIDINGS_"):
                mp.delenv(name)
        mp.setenv("TIDINGS_CONFIG", str(tmp / "absent.toml"))
        with live_api("sql", f"sqlite:///{tmp / 'schema.db'}") as api:
            yield api


@pytest.fixture(scope="module")
def activity_ids(live: LiveApi) -> list[str]:
    """Seed data: every timeline follows every other user; each user published twice."""
    out: list[str] = []
    with httpx.Client(base_url=live.url, headers=live.headers(), timeout=10) as client:
        pairs = [
            {"follower": f"timeline:{a}", "source": f"user:{b}"}
            for a in KEYS
            for b in KEYS
            if a != b
        ]
        assert client.post("/v1/follows:batch", json={"follows": pairs}).status_code == 200
        for key in KEYS:
            for n in range(2):
                body = {"actor": key, "verb": "post", "object": f"note:{n}", "foreign_id": f"f{n}"}
                r = client.post(f"/v1/feeds/user/{key}/activities", json=body)
                assert r.status_code == 201, r.text
                out.append(r.json()["id"])
    return out


# model_construct: no environment or tidings.toml is read at import time (no engine is built).
FULL_SCHEMA = schemathesis.openapi.from_dict(
    create_app(settings=Settings.model_construct(secret=SECRET)).openapi()
)
#: Live streams answer for as long as the client stays (test_http_live.py):
#: generated calls of them would only time out.
SCHEMA = FULL_SCHEMA.exclude(path_regex=r"(/events|/firehose)$")


def test_served_schema_is_the_one_tested(live: LiveApi) -> None:
    with httpx.Client(base_url=live.url, timeout=10) as client:
        assert client.get("/openapi.json").json() == FULL_SCHEMA.raw_schema


def _real(value: Any, options: Sequence[str]) -> str:
    """One of ``options``, picked by the generated ``value``."""
    return options[len(str(value)) % len(options)]


@SCHEMA.parametrize()
@SETTINGS
def test_as_generated(case: schemathesis.Case[Any], live: LiveApi) -> None:
    case.call_and_validate(base_url=live.url, headers=live.headers(), checks=CHECKS, timeout=10)


@SCHEMA.parametrize()
@SETTINGS
def test_on_real_feeds(
    case: schemathesis.Case[Any], live: LiveApi, activity_ids: list[str]
) -> None:
    params = case.path_parameters
    if params:
        if "group" in params:
            params["group"] = _real(params["group"], GROUPS)
        if "key" in params:
            params["key"] = _real(params["key"], KEYS)
        if "source" in params:
            params["source"] = "user:" + _real(params["source"], KEYS)
        if "activity_id" in params:
            params["activity_id"] = _real(params["activity_id"], activity_ids)
    case.call_and_validate(base_url=live.url, headers=live.headers(), checks=CHECKS, timeout=10)
