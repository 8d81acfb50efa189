"""The ``tidings`` command line.

Importing a command module registers its commands on ``app``, so the order of
these imports is the order of the commands in ``tidings --help``: ``feeds``
(read, add, follow, unfollow), ``live`` (tail, firehose), ``admin`` (reclassify, rebuild, migrate,
worker), ``serve`` (demo, token, serve).
"""

# isort: off
from tidings.cli import feeds  # noqa: F401
from tidings.cli import live  # noqa: F401
from tidings.cli import admin  # noqa: F401
from tidings.cli import serve  # noqa: F401

# isort: on
from tidings.cli.app import main

__all__ = ["main"]
