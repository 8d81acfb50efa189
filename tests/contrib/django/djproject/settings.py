"""Settings of the test project, for its tests (``djsetup``) and its
``manage.py`` alike.

``DJPROJECT_DATABASE_URL`` names Django's database: ``sqlite://`` (in memory,
the default), ``sqlite:////path/to.db`` or ``postgresql://user@host:port/name``
(a ``+driver`` suffix, as SQLAlchemy URLs have, is ignored).
``DJPROJECT_TIDINGS_URL`` is tidings' ``database_url`` (default: in memory);
tests that need their own give it in ``settings.TIDINGS``.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote, urlsplit

from django.db.models import options

from tidings.contrib.django.actstream import ACTSTREAM_GROUPS

# django-notifications-hq 1.8.3, its newest release, declares Meta.index_together,
# which Django 5.1 removed: without this its models do not load on Django 5.2.
# The option is let through (Django ignores it); the importer reads the table
# the package's migrations made, which is the same on every Django.
if "index_together" not in options.DEFAULT_NAMES:
    options.DEFAULT_NAMES = (*options.DEFAULT_NAMES, "index_together")


def database(url: str) -> dict[str, Any]:
    """Django's ``DATABASES`` entry for ``url``."""
    parts = urlsplit(url)
    scheme = parts.scheme.partition("+")[0]
    if scheme == "sqlite":
        path = unquote(parts.path)[1:]  # sqlite:///rel, sqlite:////abs; sqlite:// in memory
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": path or ":memory:"}
    if scheme in ("postgres", "postgresql"):
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parts.path.lstrip("/")),
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
        }
    raise ValueError(f"DJPROJECT_DATABASE_URL: {url!r} is neither sqlite:// nor postgresql://")


DEBUG = False
SECRET_KEY = "tidings-django-tests"
USE_TZ = True
DATABASES = {"default": database(os.environ.get("DJPROJECT_DATABASE_URL", "sqlite://"))}
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.admin",
    "tidings.contrib.django",
    "djproject",
    # The packages the importers read, filled through their own APIs.
    "actstream",
    "notifications",
]
# The views' tests: sessions, CSRF, the admin.
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "djproject.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
# Their extra keyword data is kept (in a JSON column), so the importers carry it over.
ACTSTREAM_SETTINGS = {"USE_JSONFIELD": True}
DJANGO_NOTIFICATIONS_CONFIG = {"USE_JSONFIELD": True, "SOFT_DELETE": True}
# Each test sets its own (pytest-django's ``settings`` fixture).
TIDINGS = {
    "task_runner": "sync",
    "database_url": os.environ.get("DJPROJECT_TIDINGS_URL", "sqlite://"),
    "groups": {**ACTSTREAM_GROUPS, "djproject_topic": {}},
}
