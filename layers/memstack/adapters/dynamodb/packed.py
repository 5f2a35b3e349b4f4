"""A snapshot as one compact byte string (what a cold container loads from S3) and back.

Layout: a magic line, the length of a JSON header (8 bytes, little-endian),
the header, then numpy arrays, each starting on a 64-byte boundary. The
header holds what is small and irregular (ids, session codes, the BM25
vocabulary, each row's lineage) and names every array's offset, dtype and
shape. Loading is one ``json.loads`` and zero-copy views: the vector matrix
stays a view of the buffer; the other arrays are copied out (small), so the
buffer is freed once the matrix is replaced. Records are kept as one JSON
object per row and decoded only when a search returns or pools them.

Nothing here is lossy: a snapshot packed and loaded ranks exactly as the one
packed (the same float32 vectors, BM25 postings, lengths and live flags).
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

from memstack.adapters.dynamodb.snapshot import Snapshot
from memstack.adapters.filter_columns import FilterColumns
from memstack.adapters.stored_fields import record_from_fields, stored_fields
from memstack.domain.bm25 import Bm25Index, PackedPostings
from memstack.models import MemoryRecord

MAGIC = b"memstack-snapshot/1\n"
_LENGTH = struct.Struct("<Q")
_ALIGN = 64


class PackedFormatError(ValueError):
    """The bytes are not a snapshot this code wrote (or were cut short)."""


def _row_json(record: MemoryRecord) -> bytes:
    return json.dumps(
        {"id": record.id, **stored_fields(record), "metadata": record.metadata}, separators=(",", ":")
    ).encode()


class StoredRows:
    """A loaded snapshot's records as stored: one JSON object per row, decoded on demand."""

    def __init__(self, blob: bytes, offsets: np.ndarray) -> None:
        self.blob, self.offsets = blob, offsets.tolist()

    def raw(self, row: int) -> bytes:
        return self.blob[self.offsets[row] : self.offsets[row + 1]]

    def __call__(self, row: int) -> MemoryRecord:
        fields = json.loads(self.raw(row))
        return record_from_fields(fields, id_key="id", load_metadata=lambda m: m or {})


def _rows(snapshot: Snapshot) -> list[bytes]:
    """Each row as stored: a row never decoded since the load is copied as it was."""
    stored = snapshot.decoder if isinstance(snapshot.decoder, StoredRows) else None
    return [
        stored.raw(i) if stored is not None and not snapshot.decoded(i) else _row_json(snapshot.record(i))
        for i in range(snapshot.size)
    ]


def pack(snapshot: Snapshot) -> bytes:
    """The snapshot's rows, vectors, columns and BM25 index as bytes (``unpack`` reads them)."""
    n = snapshot.size
    rows = _rows(snapshot)
    successors, sources = snapshot.lineage()
    postings = snapshot.bm25.packed(n)
    arrays: dict[str, np.ndarray] = {
        "has_vector": snapshot.has_vector[:n],
        "created": snapshot.created[:n],
        **{f"col_{name}": getattr(snapshot.columns, name)[:n] for name in FilterColumns.array_names()},
        "bm25_offsets": postings.offsets,
        "bm25_docs": postings.docs,
        "bm25_tfs": postings.tfs,
        "bm25_lengths": postings.lengths,
        "bm25_live": postings.live,
        "record_offsets": np.cumsum([0, *map(len, rows)], dtype=np.int64),
        "records": np.frombuffer(b"".join(rows), dtype=np.uint8),
        # Last: a buffer with room after it lets the matrix grow in place (``unpack``).
        "vectors": np.ascontiguousarray(snapshot.matrix, dtype=np.float32),
    }
    header: dict[str, Any] = {
        "token": snapshot.token,
        "seq": snapshot.seq,
        "epoch": snapshot.epoch,
        "ids": snapshot.ids,
        "sessions": snapshot.columns.sessions,
        "terms": postings.terms,
        "successors": {memory_id: row for memory_id, row in successors.items() if row < n},
        "sources": {s: [r for r in rows_of if r < n] for s, rows_of in sources.items()},
        "arrays": {},
    }
    offset = 0
    for name, array in arrays.items():
        header["arrays"][name] = [offset, array.dtype.str, list(array.shape)]
        offset += -(-array.nbytes // _ALIGN) * _ALIGN
    head = json.dumps(header, separators=(",", ":")).encode()
    start = -(-(len(MAGIC) + _LENGTH.size + len(head)) // _ALIGN) * _ALIGN
    out = bytearray(start + offset)
    out[: len(MAGIC)] = MAGIC
    out[len(MAGIC) : len(MAGIC) + _LENGTH.size] = _LENGTH.pack(len(head))
    out[len(MAGIC) + _LENGTH.size : len(MAGIC) + _LENGTH.size + len(head)] = head
    for name, array in arrays.items():
        at = start + header["arrays"][name][0]
        out[at : at + array.nbytes] = np.ascontiguousarray(array).tobytes()
    return bytes(out)


def header_of(buffer: Buffer | memoryview) -> tuple[dict[str, Any], int]:
    """(the header, where the arrays start); ``PackedFormatError`` when it is not one of ours."""
    view = buffer.data if isinstance(buffer, np.ndarray) else memoryview(buffer)
    if bytes(view[: len(MAGIC)]) != MAGIC:
        raise PackedFormatError("not a memstack snapshot")
    (length,) = _LENGTH.unpack_from(view, len(MAGIC))
    begin = len(MAGIC) + _LENGTH.size
    if begin + length > len(view):
        raise PackedFormatError("the snapshot is cut short")
    try:
        header = json.loads(bytes(view[begin : begin + length]))
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise PackedFormatError("the snapshot's header is not JSON") from exc
    return header, -(-(begin + length) // _ALIGN) * _ALIGN


Buffer = bytes | bytearray | np.ndarray


def _matrix(buffer: Buffer, offset: int, shape: list[int]) -> np.ndarray:
    """The vectors as a view of ``buffer``, with every whole row of room after them as spare rows
    (a writable buffer only: a view of ``bytes`` is read-only, and grows by copying)."""
    rows, dim = shape
    if not isinstance(buffer, bytes) and dim:
        rows = max(rows, (len(buffer) - offset) // (4 * dim))
    return np.frombuffer(buffer, dtype=np.float32, count=rows * dim, offset=offset).reshape(rows, dim)


def unpack(buffer: Buffer, size: int | None = None) -> Snapshot:
    """The snapshot ``pack`` wrote in the first ``size`` bytes of ``buffer`` (all by default).

    The matrix is a view of ``buffer`` (not copied); a writable buffer with room after
    ``size`` (``SnapshotObjects.load``'s ``spare``) holds the rows later writes append, so
    the first write after a cold start does not copy the matrix.
    """
    header, start = header_of(buffer)
    size = len(buffer) if size is None else size

    def array(name: str, *, copy: bool = True) -> np.ndarray:
        offset, dtype, shape = header["arrays"][name]
        count = int(np.prod(shape)) if shape else 1
        if start + offset + count * np.dtype(dtype).itemsize > size:
            raise PackedFormatError(f"the snapshot is cut short (array {name})")
        view = np.frombuffer(buffer, dtype=dtype, count=count, offset=start + offset).reshape(shape)
        return view.copy() if copy else view

    vectors_at, _, vectors_shape = header["arrays"]["vectors"]
    if start + vectors_at + 4 * int(np.prod(vectors_shape)) > size:
        raise PackedFormatError("the snapshot is cut short (array vectors)")
    ids: list[str] = header["ids"]
    blob_offsets = array("record_offsets")
    blob = array("records").tobytes()
    postings = PackedPostings(
        terms=header["terms"],
        offsets=array("bm25_offsets"),
        docs=array("bm25_docs"),
        tfs=array("bm25_tfs"),
        lengths=array("bm25_lengths"),
        live=array("bm25_live"),
    )
    columns = FilterColumns(
        **{name: array(f"col_{name}") for name in FilterColumns.array_names()},
        sessions=dict(header["sessions"]),
    )
    return Snapshot.assembled(
        token=header["token"],
        seq=int(header["seq"]),
        epoch=header["epoch"],
        ids=ids,
        records=[None] * len(ids),
        decode=StoredRows(blob, blob_offsets),
        vectors=_matrix(buffer, start + vectors_at, vectors_shape),
        has_vector=array("has_vector"),
        created=array("created"),
        columns=columns,
        bm25=Bm25Index.from_packed(postings),
        successors=dict(header["successors"]),
        sources=header["sources"],  # lists as parsed: a row's entry is replaced, never changed
    )
