"""The build's one step beyond pyproject.toml: the web app's copy of the JS client.

The client's one source is ``clients/js/tidings.mjs``, the npm package's file.
Package data can only name files inside the package, so ``build_py`` copies
it into the wheel, where the web app serves it from
(``tidings/webapp/static/js/tidings.mjs``). A checkout (``PYTHONPATH=src`` or
an editable install) has no copy: the web app serves ``clients/js``'s file
itself, so the two can never differ.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
CLIENT = ROOT / "clients" / "js" / "tidings.mjs"
#: Where the wheel holds it, under the build directory.
PACKAGED = Path("tidings", "webapp", "static", "js", "tidings.mjs")


class BuildWithClient(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # served from clients/js, as in any checkout
            return
        if not CLIENT.is_file():
            raise FileNotFoundError(f"{CLIENT} is missing: the web app loads it")
        target = Path(self.build_lib) / PACKAGED
        self.mkpath(str(target.parent))
        self.copy_file(str(CLIENT), str(target))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = list(super().get_outputs(include_bytecode))
        if not self.editable_mode:
            outputs.append(str(Path(self.build_lib) / PACKAGED))
        return outputs


setup(cmdclass={"build_py": BuildWithClient})
