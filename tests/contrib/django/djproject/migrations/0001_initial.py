"""The test project's tables. A migration of its own, so that on PostgreSQL
its foreign keys to auth's tables are made after them (an app without
migrations has its tables made before any migration runs)."""

from __future__ import annotations

from typing import Any, ClassVar

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):  # type: ignore[misc]
    initial = True

    dependencies: ClassVar[list[Any]] = [migrations.swappable_dependency(settings.AUTH_USER_MODEL)]

    operations: ClassVar[list[Any]] = [
        migrations.CreateModel(
            name="Topic",
            fields=[
                ("id", models.AutoField(primary_key=True, serialize=False)),
                ("name", models.CharField(max_length=100)),
            ],
        ),
        migrations.CreateModel(
            name="Post",
            fields=[
                ("id", models.AutoField(primary_key=True, serialize=False)),
                ("title", models.CharField(max_length=200)),
                ("body", models.TextField(blank=True)),
                ("draft", models.BooleanField(default=False)),
                (
                    "author",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, to=settings.AUTH_USER_MODEL
                    ),
                ),
                (
                    "topic",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        to="djproject.topic",
                    ),
                ),
            ],
        ),
    ]
