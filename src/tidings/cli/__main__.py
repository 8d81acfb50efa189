"""``python -m tidings.cli``: the same as the ``tidings`` command."""

from tidings.cli.main import main

main()
