"""The service's routes, one module-level router per resource.

``create_app`` includes them in the order of :data:`ROUTERS`, which is also
their order in the OpenAPI document. The feed read, which nearly all traffic
takes, is not among them: it is :mod:`tidings.http.fastpath`.
"""

from tidings.http.routes import activities, feeds, follows, live, ops, reactions, rules, users

ROUTERS = (
    feeds.router,
    live.router,
    activities.router,
    reactions.router,
    follows.router,
    users.router,
    rules.router,
    ops.router,
)

__all__ = ["ROUTERS"]
