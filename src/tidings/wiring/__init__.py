"""Building an engine: its parts from :class:`~tidings.settings.Settings`
(:mod:`tidings.wiring.parts`), then its services over them, connected
(:mod:`tidings.wiring.services`). The one place that picks implementations
and connects them."""

from tidings.wiring.parts import Parts, TaskRunnerChoice, build, make_task_runner
from tidings.wiring.services import Services, assemble

__all__ = ["Parts", "Services", "TaskRunnerChoice", "assemble", "build", "make_task_runner"]
