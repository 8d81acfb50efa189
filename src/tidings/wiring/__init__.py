"""Building an engine: its parts from :class:`~tidings.settings.Settings`
(:mod:`tidings.wiring.parts`), then its services over them, connected
(:mod:`tidings.wiring.services`). The one place that picks implementations
and connects them."""

from tidings.wiring.parts import DeliveryMode, Parts, build, runner
from tidings.wiring.services import Services, assemble

__all__ = ["DeliveryMode", "Parts", "Services", "assemble", "build", "runner"]
