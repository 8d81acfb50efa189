"""Django configured for the tests of tidings.contrib.django, once per process,
on first import: the rest of the suite never sees Django (no
DJANGO_SETTINGS_MODULE; pytest-django stays idle until this runs)."""

from __future__ import annotations

import django
from django.conf import settings

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="tidings-django-tests",
        USE_TZ=True,
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        INSTALLED_APPS=[
            "django.contrib.contenttypes",
            "django.contrib.auth",
            "django.contrib.sessions",
            "django.contrib.messages",
            "django.contrib.admin",
            "tidings.contrib.django",
            "djproject",
        ],
        # The views' tests: sessions, CSRF, the admin.
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.common.CommonMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ],
        ROOT_URLCONF="djproject.urls",
        TEMPLATES=[
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
        ],
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
        # Each test sets its own (pytest-django's ``settings`` fixture).
        TIDINGS={"task_runner": "sync", "database_url": "sqlite://"},
    )
    django.setup()
