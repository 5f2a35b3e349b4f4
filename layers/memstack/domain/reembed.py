"""Re-embed a whole store with the configured embedder (``memstack reembed``), resumably.

A store's vectors come from one embedder (``domain/embedder_record.py``); to
switch, every record needs a vector from the new one. Each user in turn:

1. every version of the user's records is exported (``domain/transfer.py``) to a
   file in the work directory, written whole and then renamed, so it is either
   complete or absent;
2. the user's records are erased from the memory store;
3. the file is imported with the new embedder: the same ids, versions, links and
   times, each live record re-embedded (a deleted one keeps no vector);
4. a ``.done`` marker is written, and the file removed.

Stopped anywhere (a crash, Ctrl-C, an outage), a second run finishes the job: a
user with a marker is skipped, and a user whose file is there is imported from
that file, whether or not its erase happened (the file is the user's records
then). When every user of every tenant is done, the store records the new
embedder and the work directory is removed; until then every other process keeps
refusing to start on the store. Raw turns in the short-term store have no vectors
and are not touched.

Nothing else may write to the store while this runs (stop ``memstack serve``, or
the deployment's functions refuse to start anyway once MEMSTACK_EMBEDDER names the
new embedder): a write to a user between its export and its import would be lost.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from memstack.domain.embedder_record import record_embedder, recorded
from memstack.domain.transfer import export_lines, import_lines
from memstack.ports.embedder import Embedder
from memstack.ports.store import MemoryStore, TenantListing
from memstack.ports.tenant_config import TenantConfigStore

_USERS_PAGE = 100


@dataclass
class ReembedReport:
    tenants: int = 0
    users: int = 0
    records: int = 0
    reembedded: int = 0
    #: users finished from a file a stopped run left
    resumed: int = 0
    #: users a stopped run had finished already
    skipped_done: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class _Recorded:
    """The embedder the store's record names (what the exported vectors came from)."""

    name: str
    dim: int


def _key(tenant: str, user_id: str) -> str:
    """A user's file name in the work directory: no user id in a path."""
    return hashlib.blake2b(f"{tenant}\x1f{user_id}".encode(), digest_size=16).hexdigest()


def _users(store: MemoryStore, tenant: str) -> Iterator[str]:
    cursor = None
    while True:
        page, cursor = store.users(tenant, _USERS_PAGE, cursor)
        yield from (u.user_id for u in page)
        if cursor is None:
            return


def _write_whole(path: Path, lines: Iterator[str]) -> None:
    """``lines`` into ``path``: written to a temporary name, flushed to disk, then renamed."""
    part = path.with_suffix(".part")
    with part.open("w", encoding="utf-8") as out:
        for line in lines:
            out.write(line + "\n")
        out.flush()
        os.fsync(out.fileno())
    part.replace(path)


def reembed(
    store: MemoryStore,
    embedder: Embedder,
    coarse_dim: int,
    configs: TenantConfigStore,
    workdir: Path,
    now: Callable[[], datetime],
    tenants: list[str] | None = None,
) -> ReembedReport:
    """Re-embed every user of every tenant (those the store lists, and ``tenants``); see the module."""
    report = ReembedReport()
    stored = recorded(configs).document
    old = _Recorded(str(stored.get("embedder", "unrecorded")), int(stored.get("dim", 0)))
    workdir.mkdir(parents=True, exist_ok=True)

    def finish(file: Path) -> None:
        with file.open(encoding="utf-8") as lines:
            imported = import_lines(store, lines, embedder, coarse_dim)
        report.records += imported.imported + imported.skipped_existing
        report.reembedded += imported.reembedded
        file.with_suffix(".done").touch()
        file.unlink()
        report.users += 1

    # First what a stopped run left half done: those users may no longer be in the store at all.
    resumed = set()
    for file in sorted(workdir.glob("*.jsonl")):
        finish(file)
        resumed.add(file.stem)
    report.resumed = len(resumed)
    listed = store.tenants() if isinstance(store, TenantListing) else []
    for tenant in sorted({*listed, *(tenants or [])}):
        report.tenants += 1
        for user_id in list(_users(store, tenant)):
            file = workdir / f"{_key(tenant, user_id)}.jsonl"
            if file.with_suffix(".done").exists():
                report.skipped_done += file.stem not in resumed
                continue
            _write_whole(file, export_lines(store, tenant, user_id, old))
            store.erase_user(tenant, user_id)
            finish(file)
    record_embedder(configs, embedder, now())
    shutil.rmtree(workdir, ignore_errors=True)
    return report
