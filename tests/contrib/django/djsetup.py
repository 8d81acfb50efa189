"""Django configured for the tests of tidings.contrib.django, once per process,
on first import, from the test project's settings module (djproject/settings.py,
which ``manage.py`` uses too): the rest of the suite never sees Django (no
DJANGO_SETTINGS_MODULE; pytest-django stays idle until this runs)."""

from __future__ import annotations

import django
from django.conf import settings

if not settings.configured:
    from djproject import settings as project

    settings.configure(**{name: getattr(project, name) for name in dir(project) if name.isupper()})
    django.setup()
