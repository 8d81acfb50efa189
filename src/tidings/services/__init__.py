"""The services the facade reaches as attributes, one room each.

:class:`tidings.Tidings` keeps the everyday verbs (publish, follow, read);
everything else is a service of its own: ``feeds.activities`` (publishing
that says what was new), ``feeds.reactions``, ``feeds.users``,
``feeds.objects``, ``feeds.rules`` (mutes, blocks, keyword filters),
``feeds.access`` (who may read what, and what rules hide), ``feeds.reads``
(pages as the HTTP service sends them), ``feeds.live`` (events, streams,
the firehose) and ``feeds.admin`` (rebuilds, tiers, reclassification,
delivery figures). :mod:`tidings.wiring` builds and connects them.
"""
