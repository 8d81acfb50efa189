"""``python -m tidings.cli``: the same as the ``tidings`` command."""

from tidings.cli import main

main()
