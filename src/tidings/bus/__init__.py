"""Live events: the bus that carries them (in-process or Redis), subscriptions,
and the firehose's matcher. See :mod:`tidings.core.events` for the events."""

from tidings.bus.base import Bus
from tidings.bus.subscription import Subscription

__all__ = ["Bus", "Subscription"]
