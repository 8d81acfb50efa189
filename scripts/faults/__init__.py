"""Fault scenarios on the local cluster, each under a steady load and ending
with a check of every acknowledged write::

    python -m scripts.faults all                   # every scenario, on .cluster
    python -m scripts.faults serve-kill --seconds 60
    python -m scripts.faults all --dir /tmp/c --json faults.json

Scenarios (:mod:`scripts.faults.scenarios`): ``celery-kill``,
``redis-failover``, ``postgres-restart``, ``serve-kill``, ``redis-maxmemory``.
Each prints a short report (publishes sent, acknowledged, lost, duplicated;
responses by status; SSE gap; time to recover; after the Redis failover,
the entries missing in Redis before and after ``tidings rebuild --since``)
and the command exits 1 on any loss, duplicate, response 500 or SSE gap,
or a failover that lost nothing in Redis or left something missing.

It runs on the cluster ``python -m scripts.cluster up`` started in ``--dir``
(``.cluster``); if none runs there, it starts one and stops it at the end.

- :mod:`.parts`: the faults and repairs, on processes the cluster recorded;
- :mod:`.traffic`: the load and its ledger of acknowledged writes;
- :mod:`.live`: SSE subscribers that resume with ``Last-Event-ID``;
- :mod:`.audit`: the check;
- :mod:`.report`: what a run reports, and when it failed.
"""
