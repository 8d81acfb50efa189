"""The Django app: ``"tidings.contrib.django"`` in ``INSTALLED_APPS``."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.core.signals import setting_changed

from tidings.contrib.django.engine import close_engine


def _settings_changed(*, setting: str, **_: Any) -> None:
    # Tests (``override_settings``, pytest-django's ``settings``) change TIDINGS:
    # the next get_engine() builds an engine on the new settings.
    if setting == "TIDINGS":
        close_engine()


class TidingsConfig(AppConfig):  # type: ignore[misc]
    name = "tidings.contrib.django"
    label = "tidings"
    verbose_name = "tidings"

    def ready(self) -> None:
        setting_changed.connect(_settings_changed, dispatch_uid="tidings.settings_changed")
