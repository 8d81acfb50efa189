"""The token view's token opens the signed-in user's live events on a real
``tidings serve`` with the JS client, and no one else's.

Django's engine and ``tidings serve`` share the database, the Redis server
(live events cross processes through it) and the secret, as a deployment
would. Costs about 3 s: ``tidings serve`` starting, and one node process.
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import djsetup  # configures Django before the models are imported
import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from djproject.models import Post

import tidings.contrib.django as td
from http_server import tidings_serve

assert djsetup
User = get_user_model()
SECRET = "django-live-" + "s" * 40
HERE = Path(__file__).parent
CLIENT = (HERE.parents[2] / "clients" / "js" / "tidings.mjs").as_uri()


#: What a node process printed, a JSON value a line, as it came (None: it ended).
Said = queue.Queue[dict[str, Any] | None]


@pytest.fixture
def node() -> Iterator[Callable[..., tuple[subprocess.Popen[str], Said]]]:
    """Start node processes; each is killed after the test if still running,
    and its output read to the end."""
    if shutil.which("node") is None:
        pytest.fail("node is needed to run the JS client (make test installs it)")
    started: list[tuple[subprocess.Popen[str], threading.Thread]] = []

    def run(*argv: str) -> tuple[subprocess.Popen[str], Said]:
        proc = subprocess.Popen(["node", *argv], stdout=subprocess.PIPE, text=True)
        said: Said = queue.Queue()

        def read() -> None:
            assert proc.stdout is not None
            with proc.stdout as stream:
                for line in stream:
                    said.put(json.loads(line))
            said.put(None)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        started.append((proc, reader))
        return proc, said

    yield run
    for proc, reader in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join(timeout=10)


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_the_js_client_opens_the_users_live_events_and_no_one_elses(
    settings: Any,
    tmp_path: Path,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
    node: Callable[..., tuple[subprocess.Popen[str], Said]],
) -> None:
    monkeypatch.setenv("TIDINGS_REDIS_URL", redis_url)  # for tidings serve
    with tidings_serve(tmp_path, secret=SECRET) as served:
        settings.TIDINGS = {
            "task_runner": "sync",
            "database_url": f"sqlite:///{tmp_path / 'x.db'}",  # tidings serve's
            "redis_url": redis_url,
            "secret": SECRET,
        }
        settings.TIDINGS_SERVE_URL = served.url
        try:
            alice, bob = User.objects.create(username="alice"), User.objects.create(username="bob")
            post = Post.objects.create(author=alice, title="mine")
            alice_client, bob_client = Client(), Client()
            alice_client.force_login(alice)
            bob_client.force_login(bob)
            minted = alice_client.post("/feeds/token/").json()
            own, other = minted["feeds"]["notifications"], td.notification_feed(bob)
            script = str(HERE / "live_events.mjs")
            proc, said = node(script, CLIENT, minted["url"], minted["token"], own, other)
            refused = said.get(timeout=30)
            assert refused is not None
            assert (refused["refused"], refused["feed"]) == (403, other)
            assert refused["detail"].startswith(f"{td.user_key(alice)!r} may not read {other}")
            assert said.get(timeout=30) == {"open": own}
            # Bob likes her post through the Django app, notifying her.
            activity = td.get_engine().get_activity((td.feed_of(alice), td.ref(post)))
            liked = bob_client.post(
                f"/feeds/activities/{activity.id}/reactions/",
                {"kind": "like", "to": [own]},
                content_type="application/json",
            )
            assert liked.status_code == 201
            events = []
            while (line := said.get(timeout=30)) is not None:
                events.append(line["event"])
            assert proc.wait(timeout=10) == 0
        finally:
            td.close_engine()
    [aggregate] = [e for e in events if e["type"] == "group.updated"]
    assert aggregate["feed"] == own
    [notice] = aggregate["data"]["activities"]
    assert (notice["actor"], notice["verb"]) == (td.user_key(bob), "like")
