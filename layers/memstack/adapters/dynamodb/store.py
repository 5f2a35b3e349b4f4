"""The ``dynamodb`` memory store: one DynamoDB table, search ranked in-process (the small tier).

Table layout (``settings.aws.memories_table``; the CDK stack provisions exactly this key schema):

==========================  ==================  ===============================================
``pk`` (S)                  ``sk`` (S)          item
==========================  ==================  ===============================================
``<tenant>#<user_id>``      ``MEM#<memory id>`` one memory record (every version is its own item)
``<tenant>#<user_id>``      ``META``            ``gen`` (a token rewritten by every write), ``seq``
                                                (the partition's write sequence), ``epoch``,
                                                ``snap_*`` (the packed snapshot in S3)
``<tenant>#<user_id>``      ``LOG#<seq>``       the memory ids write ``seq`` changed (``writelog``)
``<tenant>#``               ``USER#<user_id>``  the user directory: live ``stm`` / ``ltm``
                                                counts and ``last_write``, kept in every write's
                                                transaction (``GET /v1/users`` reads only these)
==========================  ==================  ===============================================

Record attributes are the model's fields (timestamps as ISO-8601 strings,
``metadata`` as a JSON string, ``source_ids`` a list) plus ``emb_full`` and
``emb_coarse``: float32 vectors as binary attributes.

Every write is a ``TransactWriteItems`` that also takes the partition's next
write sequence number (``META.seq``, conditioned on the number it read) and
puts the log item naming what it changed. Searches read ``META``; when its
token equals the token of the snapshot this container holds, the cached
snapshot (records, the full-vector matrix and a BM25 index) is reused; when
the snapshot is a few writes behind, the log since it and the items it names
are read and applied to it (``Snapshot.applied``). A container without a
usable snapshot loads the packed one ``META`` names from S3 (parallel ranged
GETs, ``snapshot_objects``) and brings it forward the same way; only without
either is the partition read again (a paginated, projected ``Query`` without
the coarse vectors). Ranking then runs on exactly the shared code:
``domain.bm25`` and numpy cosine over every full vector (the exact top-k).

``compact_user`` (run by the workers after a job, never in a request) packs the
user's snapshot to a new S3 object once ``compact_writes`` writes have
passed since the last, points ``META`` at it, deletes the object it replaces
and prunes the log items the replaced snapshot covered. ``erase_user``
deletes the partition and then every object under the user's S3 prefix.

``supersede`` is one transaction conditioned on the old item still being
current, so of two concurrent updates one wins and the other gets
``Conflict``.
"""

from __future__ import annotations

import builtins
import logging
import random
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
from botocore.exceptions import ClientError

from memstack.adapters.dynamodb import calls, items, packed, writelog
from memstack.adapters.dynamodb.fence import mark_erased, marker_key, not_erased_since
from memstack.adapters.dynamodb.snapshot import Snapshot
from memstack.adapters.dynamodb.snapshot_objects import SnapshotObjects, object_key
from memstack.domain.cursors import decode_position, encode_position
from memstack.domain.erasure import Fence, erased_while_working
from memstack.domain.vectors import from_blob
from memstack.errors import BadRequest, Conflict, DependencyFailed, SettingsError
from memstack.models import ListOrder, MemoryFilters, MemoryRecord, ScoredId, UserSummary
from memstack.ports.store import MemoryStore, TermCounts
from memstack.ports.tenant_config import TenantConfigStore

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.ports.stm import ShortTermStore
    from memstack.settings import Settings

logger = logging.getLogger(__name__)  # configured at the edges (memstack.logs)

# DynamoDB limits: 100 actions and 4 MB per transaction, 100 keys per BatchGetItem,
# 25 requests per BatchWriteItem. We stay under them with room for the META update.
_TX_MAX_ITEMS = 25
_TX_MAX_BYTES = 3_000_000
_BATCH_WRITE = 25
_TX_RETRIES = 5
#: attempts at taking the partition's next write sequence number against concurrent writers
_SEQ_RETRIES = 20
#: cancellation reasons that say "try again", not "your condition failed"
_TRANSIENT_CODES = frozenset(
    {"None", "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
)
#: writes after the stored snapshot that make a compaction due (``compact_user``)
COMPACT_WRITES = 64
#: log items one compaction deletes at most
PRUNE_MAX = 2_000


class DynamoDBMemoryStore:
    """The ``MemoryStore`` port on one DynamoDB table (see the module docstring for the layout)."""

    def __init__(
        self,
        table_name: str,
        client: Any | None = None,
        *,
        region: str | None = None,
        cache_size: int = 256,
        snapshots: SnapshotObjects | None = None,
        compact_writes: int = COMPACT_WRITES,
    ) -> None:
        if not table_name:
            raise SettingsError("MEMSTACK_MEMORIES_TABLE: the dynamodb store needs a table name")
        self.table = table_name
        self.region = region
        self.snapshots = snapshots
        self.compact_writes = compact_writes
        self._client = client
        self._cache: OrderedDict[tuple[str, str], Snapshot] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        # Re-entrant: ``compact_user`` holds it around the snapshot it packs, which may refresh it.
        self._refresh_lock = threading.RLock()

    @property
    def client(self) -> Any:
        """The boto3 DynamoDB client, created on first use and kept for the container's life."""
        if self._client is None:
            import boto3
            from botocore.config import Config

            self._client = boto3.client(
                "dynamodb",
                region_name=self.region,
                config=Config(retries={"mode": "adaptive", "max_attempts": 8}),
            )
        return self._client

    # ------------------------------------------------------------------ writes
    def _meta_update(self, tenant: str, user_id: str) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": self.table,
                "Key": items.meta_key(tenant, user_id),
                "UpdateExpression": "SET #g = :g",
                "ExpressionAttributeNames": {"#g": "gen"},
                "ExpressionAttributeValues": {":g": {"S": uuid.uuid4().hex}},
            }
        }

    def _directory_update(
        self, tenant: str, user_id: str, delta: dict[str, int], last_write: str | None
    ) -> dict[str, Any]:
        """The user's directory item: counters moved by ``delta``, ``last_write`` set when given."""
        names = {"#u": "user_id", "#s": "stm", "#l": "ltm"}
        values: dict[str, Any] = {
            ":u": {"S": user_id},
            ":ds": {"N": str(delta.get("stm", 0))},
            ":dl": {"N": str(delta.get("ltm", 0))},
        }
        sets = "#u = :u"
        if last_write is not None:
            names["#w"] = "last_write"
            values[":w"] = {"S": last_write}
            sets += ", #w = :w"
        return {
            "Update": {
                "TableName": self.table,
                "Key": items.directory_key(tenant, user_id),
                "UpdateExpression": f"SET {sets} ADD #s :ds, #l :dl",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }

    def _put_action(self, record: MemoryRecord) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self.table,
                "Item": items.to_item(record),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def _erasure_key(self, tenant: str, user_id: str) -> dict[str, Any]:
        return marker_key(tenant, user_id)

    def _not_erased_since(self, tenant: str, user_id: str, fence: Fence | None) -> list[dict[str, Any]]:
        return not_erased_since(self.table, self._erasure_key(tenant, user_id), fence)

    def _transact(self, actions: list[dict[str, Any]]) -> list[str]:
        """Run one transaction; returns [] on success or the cancellation codes, one per action.

        A cancellation caused only by a concurrent transaction on the same items
        (``TransactionConflict``, e.g. two writers bumping ``META`` at once) or by
        throttling is retried with backoff; condition failures are returned.
        """
        for attempt in range(_TX_RETRIES):
            try:
                self.client.transact_write_items(TransactItems=actions)
                return []
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                    raise DependencyFailed(f"DynamoDB write failed: {exc}") from exc
                reasons = exc.response.get("CancellationReasons") or []
                codes = [str(r.get("Code", "None")) for r in reasons] or ["Unknown"]
            if "ConditionalCheckFailed" in codes or not set(codes) <= _TRANSIENT_CODES:
                return codes
            time.sleep(min(0.05 * 2**attempt, 1.0) * (0.5 + random.random()))
        raise DependencyFailed("DynamoDB kept cancelling the write (concurrent writers); try again")

    def _write(
        self, tenant: str, user_id: str, actions: list[dict[str, Any]], ids: list[str], fence: Fence | None
    ) -> list[str]:
        """Run ``actions`` as the partition's next numbered write (``writelog``), with the erase fence.

        Returns [] on success, else the cancellation codes: one per action, then the
        fence's last when there is one. Losing the sequence number to a concurrent
        writer is not a failure: the write takes the next one.
        """
        check = self._not_erased_since(tenant, user_id, fence)
        for _attempt in range(_SEQ_RETRIES):
            try:
                head = writelog.read_head(self.client, self.table, tenant, user_id)
            except ClientError as exc:
                raise DependencyFailed(f"DynamoDB write failed: {exc}") from exc
            numbered = writelog.next_write(self.table, tenant, user_id, head.seq, ids)
            codes = self._transact([*actions, *numbered, *check])
            if not codes:
                return []
            own, taken = codes[: len(actions)], codes[len(actions) : len(actions) + len(numbered)]
            fenced = bool(check) and codes[-1] == "ConditionalCheckFailed"
            if "ConditionalCheckFailed" in own or fenced or "ConditionalCheckFailed" not in taken:
                return [*own, *codes[len(actions) + len(numbered) :]]
        raise DependencyFailed("DynamoDB: concurrent writers kept taking the write sequence; try again")

    def put(self, records: list[MemoryRecord], *, fence: Fence | None = None) -> None:
        if not records:
            return
        ids = [(r.tenant, r.user_id, r.id) for r in records]
        if len(set(ids)) != len(ids):
            raise Conflict("the same memory id appears twice in one write")
        by_partition: dict[tuple[str, str], list[MemoryRecord]] = {}
        for r in records:
            by_partition.setdefault((r.tenant, r.user_id), []).append(r)
        written: list[MemoryRecord] = []
        for (tenant, user_id), group in by_partition.items():
            for chunk in _chunks_by_size(group):
                newest = max(r.created_at for r in chunk).isoformat()
                # The puts, then the user's directory entry (no condition: it never clashes).
                actions = [
                    *(self._put_action(r) for r in chunk),
                    self._directory_update(tenant, user_id, items.live_counts(chunk), newest),
                ]
                codes = self._write(tenant, user_id, actions, [r.id for r in chunk], fence)
                if fence and len(codes) > len(actions) and codes[-1] == "ConditionalCheckFailed":
                    self._undo_puts(written)
                    raise erased_while_working()
                if codes:
                    # All or nothing, as the embedded store: take back the chunks already written.
                    self._undo_puts(written)
                    clashing = [
                        chunk[i].id
                        for i, c in enumerate(codes[: len(chunk)])
                        if c == "ConditionalCheckFailed"
                    ]
                    raise Conflict(f"memory {', '.join(clashing) or '?'} already exists")
                written += chunk

    def _undo_puts(self, records: list[MemoryRecord]) -> None:
        for start in range(0, len(records), _BATCH_WRITE):
            chunk = records[start : start + _BATCH_WRITE]
            calls.batch_write(
                self.client,
                self.table,
                [{"DeleteRequest": {"Key": items.memory_key(r.tenant, r.user_id, r.id)}} for r in chunk],
            )
        # A new token without a new sequence number: every cached snapshot re-reads the partition.
        # The token and the counters move in one transaction, as in every write: the directory
        # backfill relies on a counter never changing without the token.
        for tenant, user_id in {(r.tenant, r.user_id) for r in records}:
            mine = [r for r in records if (r.tenant, r.user_id) == (tenant, user_id)]
            taken_back = {tier: -n for tier, n in items.live_counts(mine).items()}
            actions = [
                self._meta_update(tenant, user_id),
                self._directory_update(tenant, user_id, taken_back, None),
            ]
            if self._transact(actions):
                raise DependencyFailed("DynamoDB refused to take back a partial write; try again")

    def supersede(
        self, tenant: str, user_id: str, old_id: str, new: MemoryRecord, *, fence: Fence | None = None
    ) -> None:
        if (new.tenant, new.user_id) != (tenant, user_id):
            raise BadRequest("a new version must belong to the same tenant and user")
        retire = {
            "Update": {
                "TableName": self.table,
                "Key": items.memory_key(tenant, user_id, old_id),
                "UpdateExpression": "SET #c = :false, #s = :at",
                "ConditionExpression": "attribute_exists(pk) AND #c = :true",
                "ExpressionAttributeNames": {"#c": "is_current", "#s": "superseded_at"},
                "ExpressionAttributeValues": {
                    ":false": {"BOOL": False},
                    ":true": {"BOOL": True},
                    ":at": {"S": new.created_at.isoformat()},
                },
            }
        }
        # Items never change once written but for is_current: the old version's tier and
        # deleted mark, read first, say how the directory's live counters move.
        old = self.get(tenant, user_id, old_id)
        delta = items.live_counts([new])
        if old is not None and not old.deleted:
            delta[str(old.tier)] -= 1
        directory = self._directory_update(tenant, user_id, delta, new.created_at.isoformat())
        actions = [retire, self._put_action(new), directory]
        codes = self._write(tenant, user_id, actions, [old_id, new.id], fence)
        if codes:
            if fence and len(codes) > len(actions) and codes[-1] == "ConditionalCheckFailed":
                raise erased_while_working()
            if codes[0] == "ConditionalCheckFailed":
                raise Conflict(f"memory {old_id} is not the current version")
            raise Conflict(f"memory {new.id} already exists")

    def mark(self, tenant: str, user_id: str, ids: list[str], **fields: object) -> int:
        def marked(record: MemoryRecord) -> MemoryRecord | None:
            if all(record.metadata.get(k) == v for k, v in fields.items()):
                return None
            return record.model_copy(update={"metadata": {**record.metadata, **fields}})

        return self._set_field(tenant, user_id, ids, "metadata", marked)

    def link_conflicts(self, tenant: str, user_id: str, links: dict[str, list[str]]) -> int:
        def linked(record: MemoryRecord) -> MemoryRecord | None:
            new = list(dict.fromkeys([*record.conflicts_with, *links[record.id]]))
            return None if new == record.conflicts_with else record.model_copy(update={"conflicts_with": new})

        return self._set_field(tenant, user_id, list(links), "conflicts_with", linked)

    def _set_field(
        self,
        tenant: str,
        user_id: str,
        ids: list[str],
        name: str,
        change: Callable[[MemoryRecord], MemoryRecord | None],
    ) -> int:
        """Set attribute ``name`` of each record ``change`` returns a changed copy of (None: as it is).

        Each update is conditioned on the value read (or its absence: an item written before the
        field was): a concurrent writer makes us re-read, not overwrite. Returns how many changed.
        """
        changed = 0
        for start in range(0, len(ids), _TX_MAX_ITEMS):
            chunk = ids[start : start + _TX_MAX_ITEMS]
            for _attempt in range(5):
                current = self.get_many(tenant, user_id, chunk)
                actions = []
                touched: list[str] = []
                for memory_id in chunk:
                    record = current.get(memory_id)
                    new = change(record) if record is not None else None
                    if record is None or new is None:
                        continue
                    touched.append(memory_id)
                    actions.append(
                        {
                            "Update": {
                                "TableName": self.table,
                                "Key": items.memory_key(tenant, user_id, memory_id),
                                "UpdateExpression": "SET #f = :new",
                                "ConditionExpression": "attribute_not_exists(#f) OR #f = :old",
                                "ExpressionAttributeNames": {"#f": name},
                                "ExpressionAttributeValues": {
                                    ":new": items.to_item(new)[name],
                                    ":old": items.to_item(record)[name],
                                },
                            }
                        }
                    )
                if not actions:
                    break
                if not self._write(tenant, user_id, actions, touched, None):
                    changed += len(actions)
                    break
            else:
                raise Conflict(f"memory {name} kept changing under a concurrent writer; try again")
        return changed

    def erase_user(self, tenant: str, user_id: str) -> dict[str, int]:
        # First the marker: a write transaction of work begun before it is refused from now on.
        mark_erased(self.client, self.table, self._erasure_key(tenant, user_id))
        keys = [
            {"pk": row["pk"], "sk": row["sk"]}
            for row in calls.query_partition(
                self.client, self.table, tenant, user_id, ("pk", "sk"), memories_only=False
            )
        ]
        for start in range(0, len(keys), _BATCH_WRITE):
            requests = [{"DeleteRequest": {"Key": k}} for k in keys[start : start + _BATCH_WRITE]]
            calls.batch_write(self.client, self.table, requests)
        self.client.delete_item(TableName=self.table, Key=items.directory_key(tenant, user_id))
        with self._lock:
            self._cache.pop((tenant, user_id), None)
        counts = {"memories": sum(1 for k in keys if k["sk"]["S"].startswith(items.MEMORY_PREFIX))}
        if self.snapshots is not None:
            # After META is gone: a compaction racing with this erase either named its object in
            # META before (so it was written before this listing, which finds it) or fails to
            # name it and deletes it itself (``compact_user``).
            counts["snapshots"] = self.snapshots.erase(tenant, user_id)
        return counts

    # ------------------------------------------------------------------- reads
    def get(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord | None:
        expression, names = items.projection(items.RECORD_ATTRIBUTES)
        response = self.client.get_item(
            TableName=self.table,
            Key=items.memory_key(tenant, user_id, memory_id),
            ConsistentRead=True,
            ProjectionExpression=expression,
            ExpressionAttributeNames=names,
        )
        item = response.get("Item")
        return items.from_item(item) if item else None

    def get_many(self, tenant: str, user_id: str, ids: list[str]) -> dict[str, MemoryRecord]:
        rows = calls.batch_get(self.client, self.table, tenant, user_id, ids, items.RECORD_ATTRIBUTES)
        return {r.id: r for r in map(items.from_item, rows)}

    def embeddings(self, tenant: str, user_id: str, ids: list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for row in calls.batch_get(self.client, self.table, tenant, user_id, ids, ("id", "emb_full")):
            vec = from_blob(items.binary(row.get("emb_full", {}).get("B")))
            if vec is not None:
                out[row["id"]["S"]] = vec
        return out

    def _snapshot(self, tenant: str, user_id: str) -> Snapshot:
        """The user's partition as of its ``META``: the cached copy, brought forward, or read again.

        Unchanged token: the cached snapshot. Same epoch and a few writes behind: the
        cached snapshot with the items those writes changed (``writelog``). Otherwise
        (no copy, an erase since, a write undone, far behind): the whole partition.
        """
        head = writelog.read_head(self.client, self.table, tenant, user_id)
        key = (tenant, user_id)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and cached.token == head.token:
                self._cache.move_to_end(key)
                return cached
        # One refresh at a time: two threads bringing one snapshot forward would both append to
        # the index it shares with the next.
        with self._refresh_lock:
            with self._lock:
                latest = self._cache.get(key)
            if latest is not None and latest.token == head.token:
                return latest
            snapshot = self._caught_up(latest, head, tenant, user_id) if latest is not None else None
            if snapshot is None:
                snapshot = self._loaded(head, tenant, user_id)
            if snapshot is None:
                # Head read before the query: a write racing with us makes the snapshot newer than
                # its head, never older, so the worst case is one extra read later.
                rows = list(
                    calls.query_partition(self.client, self.table, tenant, user_id, items.SEARCH_ATTRIBUTES)
                )
                snapshot = Snapshot(head.token, rows, seq=head.seq, epoch=head.epoch)
            with self._lock:
                self._cache[key] = snapshot
                self._cache.move_to_end(key)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return snapshot

    def _loaded(self, head: writelog.Head, tenant: str, user_id: str) -> Snapshot | None:
        """The stored snapshot ``META`` names, brought forward to ``head``; None without a usable one.

        The log since the snapshot and the items it names are read while the object downloads
        (their round trips and parsing hide behind the transfer), then applied to it.
        """
        if self.snapshots is None or head.snap_key is None or head.epoch is None:
            return None
        # Room for an eighth more (the matrix is most of the object): the rows later writes
        # append go there instead of into a copy of the matrix.
        download = self.snapshots.start_load(head.snap_key, head.snap_size, spare=head.snap_size // 8)
        changed = self._changed_rows(head.snap_seq, head, tenant, user_id)
        buffer = download()
        if buffer is None:  # replaced or erased since META was read
            return None
        try:
            stored = packed.unpack(buffer, head.snap_size)
        except packed.PackedFormatError:
            # Not a snapshot this code reads (one a newer release wrote before a rollback, say): the
            # partition is read instead, and the next compaction replaces the object.
            logger.warning("the user's stored snapshot is unreadable; reading the partition", exc_info=True)
            return None
        if stored.epoch != head.epoch or stored.seq != head.snap_seq:
            return None
        if stored.token == head.token:
            return stored
        if changed is None:
            return None
        return stored.applied(changed, token=head.token, seq=head.seq, epoch=head.epoch)

    def _changed_rows(
        self, after: int, head: writelog.Head, tenant: str, user_id: str
    ) -> builtins.list[dict[str, Any]] | None:
        """The items writes ``after + 1 .. head.seq`` changed, or None when only a full read will do."""
        if not 0 < head.seq - after <= writelog.MAX_CATCH_UP:
            return None
        ids = writelog.changed_since(self.client, self.table, tenant, user_id, after, head.seq)
        if ids is None:
            return None
        rows = calls.batch_get(self.client, self.table, tenant, user_id, ids, items.SEARCH_ATTRIBUTES)
        if len(rows) != len(ids):  # an item the log names is gone (a write taken back): read it all
            return None
        return rows

    def _caught_up(self, snap: Snapshot, head: writelog.Head, tenant: str, user_id: str) -> Snapshot | None:
        """``snap`` with the writes after it applied, or None when only a full read will do."""
        if head.epoch is None or snap.epoch != head.epoch:
            return None
        rows = self._changed_rows(snap.seq, head, tenant, user_id)
        return None if rows is None else snap.applied(rows, token=head.token, seq=head.seq, epoch=head.epoch)

    def compact_user(self, tenant: str, user_id: str) -> bool:
        """Store the user's snapshot in S3 when ``compact_writes`` writes passed since the last one.

        The background half of the cold path (``ports.store.Compacting``): the workers call it
        after each job. True when a new snapshot was stored. The object is written first, then
        named in ``META`` on the condition that the partition is still in the epoch it was made
        in; refused (an erase meanwhile), the object is deleted again. Named, the object it
        replaces is deleted and the log items that one covered are pruned.
        """
        if self.snapshots is None:
            return False
        try:
            return self._compact(tenant, user_id)
        except ClientError as exc:
            raise DependencyFailed(f"DynamoDB: storing the user's snapshot failed: {exc}") from exc

    def _compact(self, tenant: str, user_id: str) -> bool:
        assert self.snapshots is not None
        head = writelog.read_head(self.client, self.table, tenant, user_id)
        if head.epoch is None or head.seq - head.snap_seq < self.compact_writes:
            return False
        with self._refresh_lock:  # no search appends to the shared index while it is packed
            snapshot = self._snapshot(tenant, user_id)
            data = packed.pack(snapshot)
        if snapshot.epoch is None or snapshot.seq <= head.snap_seq:
            return False
        key = object_key(tenant, user_id, snapshot.epoch, snapshot.seq)
        self.snapshots.save(key, data)
        named = writelog.point_at_snapshot(
            self.client,
            self.table,
            tenant,
            user_id,
            epoch=snapshot.epoch,
            seq=snapshot.seq,
            key=key,
            size=len(data),
        )
        if not named:
            self.snapshots.delete(key)
            return False
        if head.snap_key is not None and head.snap_key != key:
            self.snapshots.delete(head.snap_key)
        # The log the replaced snapshot covered: a warm container further behind loads the new one.
        # At most PRUNE_MAX items a time (a log from before snapshots were stored can be long: the
        # rest goes at the next compactions, which keeps a worker's job short).
        stale = writelog.logged_keys(self.client, self.table, tenant, user_id, head.snap_seq)[:PRUNE_MAX]
        for start in range(0, len(stale), _BATCH_WRITE):
            calls.batch_write(
                self.client,
                self.table,
                [{"DeleteRequest": {"Key": k}} for k in stale[start : start + _BATCH_WRITE]],
            )
        return True

    def successor(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord | None:
        return self._snapshot(tenant, user_id).successor(memory_id)

    def find_by_source(self, tenant: str, user_id: str, source_id: str) -> list[MemoryRecord]:
        return self._snapshot(tenant, user_id).by_source(source_id)

    def tenants(self) -> builtins.list[str]:
        # The users' directory items (pk "<tenant>#", sk "USER#<user>"): a scan, for maintenance only.
        found: set[str] = set()
        request: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": "begins_with(#sk, :user)",
            "ProjectionExpression": "#pk",
            "ExpressionAttributeNames": {"#pk": "pk", "#sk": "sk"},
            "ExpressionAttributeValues": {":user": {"S": items.USER_PREFIX}},
            "ConsistentRead": True,
        }
        while True:
            page = self.client.scan(**request)
            found.update(item["pk"]["S"].removesuffix("#") for item in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return sorted(found)
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def users(
        self, tenant: str, limit: int, cursor: str | None = None
    ) -> tuple[builtins.list[UserSummary], str | None]:
        # Only the tenant's directory partition is read, never a scan of the table.
        response = self.client.query(
            TableName=self.table,
            KeyConditionExpression="#pk = :pk AND #sk > :after",
            ExpressionAttributeNames={"#pk": "pk", "#sk": "sk"},
            ExpressionAttributeValues={
                ":pk": {"S": items.directory_partition(tenant)},
                ":after": {"S": items.USER_PREFIX + (cursor or "")},
            },
            ConsistentRead=True,
            Limit=limit + 1,
        )
        rows = response.get("Items", [])
        page = [
            UserSummary(
                user_id=row["sk"]["S"][len(items.USER_PREFIX) :],
                stm=int(row.get("stm", {}).get("N", 0)),
                ltm=int(row.get("ltm", {}).get("N", 0)),
                last_write=datetime.fromisoformat(row["last_write"]["S"]) if "last_write" in row else None,
            )
            for row in rows[:limit]
        ]
        return page, (page[-1].user_id if len(rows) > limit else None)

    def list(
        self,
        tenant: str,
        user_id: str,
        filters: MemoryFilters,
        limit: int,
        cursor: str | None = None,
        order: ListOrder = "created_at",
    ) -> tuple[builtins.list[MemoryRecord], str | None]:
        after = _decode_cursor(cursor)
        return _page(self._snapshot(tenant, user_id), filters, limit, after, order)

    # ------------------------------------------------------------------ search
    def bm25_search(
        self, tenant: str, user_id: str, query: str, k: int, filters: MemoryFilters
    ) -> builtins.list[ScoredId]:
        return self._snapshot(tenant, user_id).bm25_search(query, k, filters)

    def term_counts(self, tenant: str, user_id: str, query: str) -> TermCounts:
        """Document frequencies from the user's snapshot (its BM25 index keeps them)."""
        return self._snapshot(tenant, user_id).term_counts(query)

    def vector_search(
        self, tenant: str, user_id: str, query_coarse: np.ndarray, k: int, filters: MemoryFilters
    ) -> builtins.list[ScoredId]:
        return self._snapshot(tenant, user_id).vector_search(query_coarse, k, filters)

    def exact_vector_search(
        self,
        tenant: str,
        user_id: str,
        query_full: np.ndarray,
        k: int,
        filters: MemoryFilters,
        *,
        below: int,
    ) -> builtins.list[ScoredId] | None:
        """Full-vector top-k over the whole snapshot (``ports.store.ExactVectors``)."""
        snapshot = self._snapshot(tenant, user_id)
        return None if snapshot.size >= below else snapshot.vector_search(query_full, k, filters)

    def hybrid_candidates(
        self,
        tenant: str,
        user_id: str,
        query: str,
        query_coarse: np.ndarray,
        k_bm25: int,
        k_vector: int,
        filters: MemoryFilters,
    ) -> tuple[builtins.list[ScoredId], builtins.list[ScoredId]]:
        """(BM25 hits, coarse vector hits) from one snapshot (one META read for both)."""
        snap = self._snapshot(tenant, user_id)
        return snap.bm25_search(query, k_bm25, filters), snap.vector_search(query_coarse, k_vector, filters)

    def read_view(self, tenant: str, user_id: str) -> MemoryStore:
        """Every read of one search from one snapshot: one META read (``ports.store.ReadView``)."""
        return _PinnedPartition(self, tenant, user_id, self._snapshot(tenant, user_id))

    def tenant_config_store(self) -> TenantConfigStore:
        """Tenants' configurations in the same table (``ports.tenant_config``), on the same client."""
        from memstack.adapters.dynamodb.tenant_config import DynamoDbTenantConfigStore

        return DynamoDbTenantConfigStore(self.table, lambda: self.client)

    def close(self) -> None:
        with self._lock:
            self._cache.clear()


def _chunks_by_size(records: builtins.list[MemoryRecord]) -> Iterator[builtins.list[MemoryRecord]]:
    """Split a write so each transaction stays under DynamoDB's item and byte limits."""
    chunk: builtins.list[MemoryRecord] = []
    size = 0
    for r in records:
        approx = len(r.content.encode()) + len(r.search_text or "") + 8 * len(r.embedding_full or []) + 2048
        if chunk and (len(chunk) >= _TX_MAX_ITEMS or size + approx > _TX_MAX_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(r)
        size += approx
    if chunk:
        yield chunk


def _decode_cursor(cursor: str | None) -> tuple[float, str] | None:
    return decode_position(cursor) if cursor else None


def _page(
    snap: Snapshot,
    filters: MemoryFilters,
    limit: int,
    after: tuple[float, str] | None,
    order: ListOrder = "created_at",
) -> tuple[builtins.list[MemoryRecord], str | None]:
    """One page of ``list``: newest first by ``order``'s time, after the cursor's (time, id).

    Filtered and ordered on the snapshot's columns; only the page's records are decoded.
    """
    # The event time is what the after/before filters compare: event_time, else created_at.
    times = snap.created if order == "created_at" else snap.columns.when
    rows = np.flatnonzero(snap.mask(filters, search=False)).tolist()
    keys = sorted(((float(times[i]), snap.ids[i], i) for i in rows), reverse=True)
    if after is not None:
        keys = [k for k in keys if k[:2] < after]
    page = [snap.record(i) for _, _, i in keys[:limit]]
    next_cursor = None
    if len(keys) > limit and page:
        next_cursor = encode_position(*keys[limit - 1][:2])
    return page, next_cursor


class _PinnedPartition(DynamoDBMemoryStore):
    """One user's reads on one snapshot; other users and every write go to the store as usual."""

    def __init__(self, store: DynamoDBMemoryStore, tenant: str, user_id: str, snapshot: Snapshot) -> None:
        # The same table, client and cache as the store.
        self.table, self.region, self._client = store.table, store.region, store.client
        self._cache, self._cache_size, self._lock = store._cache, store._cache_size, store._lock
        self._refresh_lock = store._refresh_lock
        self.snapshots, self.compact_writes = store.snapshots, store.compact_writes
        self._store = store
        self._key = (tenant, user_id)
        self._pinned = snapshot

    def _snapshot(self, tenant: str, user_id: str) -> Snapshot:
        return self._pinned if (tenant, user_id) == self._key else super()._snapshot(tenant, user_id)

    def get(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord | None:
        if (tenant, user_id) != self._key:
            return super().get(tenant, user_id, memory_id)
        return self._pinned.by_id.get(memory_id)

    def get_many(self, tenant: str, user_id: str, ids: builtins.list[str]) -> dict[str, MemoryRecord]:
        if (tenant, user_id) != self._key:
            return super().get_many(tenant, user_id, ids)
        by_id = self._pinned.by_id
        return {i: by_id[i] for i in ids if i in by_id}

    def embeddings(self, tenant: str, user_id: str, ids: builtins.list[str]) -> dict[str, np.ndarray]:
        if (tenant, user_id) != self._key:
            return super().embeddings(tenant, user_id, ids)
        return self._pinned.full_vectors(ids)

    def close(self) -> None:
        """The view owns nothing; closing it leaves the store open."""


def build(settings: Settings, clients: Mapping[str, Any], stm: ShortTermStore | None) -> DynamoDBMemoryStore:
    """``MEMSTACK_STORE_BACKEND=dynamodb`` (``factory.STORES``); ``clients`` "dynamodb", "s3" when given.

    With ``MEMSTACK_SNAPSHOT_BUCKET`` the store keeps each user's packed snapshot there.
    """
    aws = settings.aws
    snapshots = (
        SnapshotObjects(aws.snapshot_bucket, clients.get("s3"), region=aws.aws_region)
        if aws.snapshot_bucket
        else None
    )
    return DynamoDBMemoryStore(
        aws.memories_table or "",
        clients.get("dynamodb"),
        region=aws.aws_region,
        snapshots=snapshots,
        compact_writes=aws.snapshot_compact_writes,
    )
