"""What a missing optional driver says (``tidings.core.extras.needs``)."""

from __future__ import annotations

import pytest

from tidings.core.errors import ConfigurationError
from tidings.core.extras import needs


@pytest.mark.parametrize(
    ("extra", "missing", "said"),
    [
        ("redis", ModuleNotFoundError("No module named 'redis'", name="redis"), "tidings[redis]"),
        ("redis", ModuleNotFoundError("x", name="hiredis"), "tidings[redis]"),
        ("postgres", ModuleNotFoundError("x", name="psycopg"), "tidings[postgres]"),
        ("celery", ModuleNotFoundError("x", name="kombu.transport"), "tidings[celery]"),
        # An import hook's error with only a message (as a blocked import has).
        ("redis", ModuleNotFoundError("No module named 'redis.cluster' (blocked)"), "redis"),
    ],
)
def test_a_missing_driver_names_the_extra(
    extra: str, missing: ModuleNotFoundError, said: str
) -> None:
    with (
        pytest.raises(ConfigurationError, match=r"pip install 'tidings\[") as raised,
        needs(extra, "the thing"),
    ):
        raise missing
    assert said in str(raised.value)
    assert str(raised.value).startswith("the thing needs the")


@pytest.mark.parametrize(
    ("extra", "missing"),
    [
        ("redis", ModuleNotFoundError("x", name="psycopg")),  # another extra's driver
        ("celery", ModuleNotFoundError("x", name="tidings.nowhere")),  # a fault of ours
        ("postgres", ModuleNotFoundError("no name at all")),
    ],
)
def test_any_other_missing_module_passes_through(extra: str, missing: ModuleNotFoundError) -> None:
    with pytest.raises(ModuleNotFoundError), needs(extra, "the thing"):
        raise missing
