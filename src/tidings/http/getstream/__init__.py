"""getstream's Activity Feeds v2 REST protocol, over the engine's services.

Applications on Stream's official clients point them at ``tidings serve``
(``/api/v1.0/``) and keep working: :mod:`~tidings.http.getstream.app` routes,
:mod:`~tidings.http.getstream.auth` checks keys and tokens,
:mod:`~tidings.http.getstream.mapper` translates shapes (pure functions),
:mod:`~tidings.http.getstream.feeds` and :mod:`~tidings.http.getstream.follows`
call the engine.
"""

from tidings.http.getstream.app import MOUNT_PATH, create_stream_app

__all__ = ["MOUNT_PATH", "create_stream_app"]
