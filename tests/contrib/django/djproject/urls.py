"""The test project's URLs: tidings' views under ``feeds/``, and the admin."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("feeds/", include("tidings.contrib.django.urls")),
]
