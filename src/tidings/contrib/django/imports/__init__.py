"""Importers: what django-activity-stream and django-notifications-hq hold,
into tidings (``manage.py tidings_import actstream|notifications``)."""

from tidings.contrib.django.imports.common import SourceMissing, deliver_all
from tidings.contrib.django.imports.from_actstream import import_actstream
from tidings.contrib.django.imports.from_notifications import import_notifications
from tidings.contrib.django.imports.tally import NoProgress, Progress, Tally

__all__ = [
    "NoProgress",
    "Progress",
    "SourceMissing",
    "Tally",
    "deliver_all",
    "import_actstream",
    "import_notifications",
]
