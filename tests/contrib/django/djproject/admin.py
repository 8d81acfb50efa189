"""The test project's admin: posts shown read-only, each with its activity."""

from __future__ import annotations

from django.contrib import admin

from djproject.models import Post
from tidings.contrib.django.admin import PublishedAdmin

admin.site.register(Post, PublishedAdmin)
