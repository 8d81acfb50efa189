"""The web app: a social feed in the browser, over the same HTTP API.

Served at ``/`` when ``web_app`` is set (``tidings serve --app``; ``tidings
demo`` does). The page is static HTML, CSS and ES modules (``static/``), with
no build step and nothing fetched from elsewhere; it talks to ``/v1`` with
the signed-in user's token like any other client. The server side here is
small: the page (with the sign-in options it may offer and the feed groups
it reads), avatars drawn from user ids, and, on a development server only,
minting a token for whichever user is picked.
"""

from tidings.webapp.routes import install

__all__ = ["install"]
