"""Processes as /proc shows them: whether one still runs (told from a later
one that reuses its pid), the members of a process group and their
descendants, and what each has used. Linux only, as the local cluster is.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name, or None when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The name is in parentheses and may hold spaces: split after the last one.
    return text[text.rindex(")") + 2 :].split()


def started_at(pid: int) -> int | None:
    fields = _stat(pid)
    return None if fields is None else int(fields[19])


def alive(pid: int, started: int | None) -> bool:
    """Whether the process ``pid`` that started at ``started`` runs (a zombie does not)."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z" and int(fields[19]) == started


def _live() -> dict[int, list[str]]:
    """Every live process's stat fields by pid. Zombies are dead, so left out:
    where nothing reaps orphans (a container whose init does not), a stopped
    process stays a zombie until the machine's end, holding no resources."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None and fields[0] != "Z":
                found[int(entry.name)] = fields
    return found


def group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid``."""
    return sorted(pid for pid, fields in _live().items() if int(fields[2]) == pgid)


def family(pgid: int) -> list[int]:
    """The live members of group ``pgid`` and all their descendants: PostgreSQL's
    backends each start a session of their own, so its group is its postmaster
    alone."""
    live = _live()
    children: dict[int, list[int]] = {}
    for pid, fields in live.items():
        children.setdefault(int(fields[1]), []).append(pid)
    found = [pid for pid, fields in live.items() if int(fields[2]) == pgid]
    for pid in found:  # (grows while walked: breadth first)
        found += [c for c in children.get(pid, []) if c not in found]
    return sorted(found)


@dataclass(frozen=True)
class Usage:
    """What one process has used: memory now, in KiB, and CPU time so far.

    RSS counts every page it maps, shared ones in full (PostgreSQL's shared
    buffers in every backend); PSS divides each shared page among the
    processes sharing it, so PSS adds up.
    """

    pid: int
    rss_kb: int
    pss_kb: int
    cpu_seconds: float


_TICKS = os.sysconf("SC_CLK_TCK")


def usage_of(pid: int) -> Usage:
    """``pid``'s usage (zeros when it is gone)."""
    found = {"Rss:": 0, "Pss:": 0}
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            name, _, rest = line.partition(" ")
            if name in found:
                found[name] = int(rest.split()[0])
    fields = _stat(pid)
    cpu = 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / _TICKS
    return Usage(pid, found["Rss:"], found["Pss:"], cpu)
