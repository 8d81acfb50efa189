"""django-activity-stream's API over tidings, for code written against it:
change the imports, keep the calls.

=================================================  ===============================================
actstream                                          tidings
=================================================  ===============================================
``from actstream import action``                   ``from tidings.contrib.django.actstream import action``
``from actstream.actions import follow, unfollow``  ``from tidings.contrib.django.actstream import follow, unfollow``
``from actstream.models import user_stream``       ``from tidings.contrib.django.actstream import user_stream``
=================================================  ===============================================

Add :data:`ACTSTREAM_GROUPS` to ``TIDINGS["groups"]``, and a group for each
model other than the user model that acts or is followed (``"blog_topic": {}``,
:mod:`tidings.contrib.django.refs`). :mod:`.mapping` says how an action
becomes activities; ``manage.py tidings_import actstream`` brings the ones
already in actstream's tables over the same way. docs/guides/moving-from-actstream.md
lists what differs.
"""

from tidings.contrib.django.actstream.actions import action, follow, is_following, unfollow
from tidings.contrib.django.actstream.mapping import ACTSTREAM_GROUPS
from tidings.contrib.django.actstream.streams import (
    Action,
    action_object_stream,
    actions,
    actor_stream,
    target_stream,
    user_stream,
)

__all__ = [
    "ACTSTREAM_GROUPS",
    "Action",
    "action",
    "action_object_stream",
    "actions",
    "actor_stream",
    "follow",
    "is_following",
    "target_stream",
    "unfollow",
    "user_stream",
]
