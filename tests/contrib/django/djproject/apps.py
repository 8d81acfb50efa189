"""The test project's app: its models act in django-activity-stream too."""

from __future__ import annotations

from django.apps import AppConfig


class DjprojectConfig(AppConfig):  # type: ignore[misc]
    name = "djproject"
    default_auto_field = "django.db.models.AutoField"

    def ready(self) -> None:
        from actstream import registry
        from django.contrib.auth import get_user_model

        registry.register(get_user_model(), self.get_model("Topic"))
