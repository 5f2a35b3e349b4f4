"""Okapi BM25 in pure Python + numpy, for backends without a search engine (DynamoDB).

Tokenisation is ``memstack.domain.text``: documents are indexed with every
word (``words``), queries keep only their distinct content words
(``query_terms``), exactly as the FTS5 and OpenSearch paths see them. User
text is only ever split into words, so quotes, operators or emoji are plain
characters, never syntax.

The index is built once per snapshot of a user's partition, follows the user's
writes in place, and is cached by the caller; scoring a query touches only the
posting lists of its terms.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memstack.domain.text import query_terms, words

#: term-frequency saturation (the usual Okapi default; FTS5 uses the same)
K1 = 1.2
#: document-length normalisation (the usual Okapi default; FTS5 uses the same)
B = 0.75


@dataclass(frozen=True)
class PackedPostings:
    """An index as flat arrays (what a stored snapshot keeps): term ``i``'s postings are
    ``docs[offsets[i]:offsets[i + 1]]`` / ``tfs[...]``, documents ascending."""

    terms: list[str]
    offsets: np.ndarray  # int64, len(terms) + 1
    docs: np.ndarray  # int32
    tfs: np.ndarray  # float32
    lengths: np.ndarray  # float32, one per position
    live: np.ndarray  # bool, one per position


class Bm25Index:
    """An inverted index over ``texts``; document ``i`` is position ``i`` of the input.

    It also grows and shrinks in place (the small tier's snapshot follows a user's
    writes without re-indexing the partition): ``extend`` appends documents and
    ``retire`` takes one out of the collection. A retired document keeps its position
    but matches nothing and no longer counts in the statistics (document count, each
    term's document frequency, average length), so the scores are exactly those of an
    index built from the live documents alone.
    """

    def __init__(
        self, texts: Sequence[str], k1: float = K1, b: float = B, *, live: Sequence[bool] | None = None
    ) -> None:
        self.k1 = k1
        self.b = b
        self.size = 0  # live documents
        self.docs = 0  # positions, live or retired
        self.lengths = np.zeros(0, dtype=np.float32)
        self.live = np.zeros(0, dtype=bool)
        self.postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        # A loaded index's postings stay in its flat arrays until a term is asked for.
        self._packed: PackedPostings | None = None
        self._packed_terms: dict[str, int] = {}
        # Postings of documents added since the last merge, as lists (cheap to append to).
        self._recent: dict[str, tuple[list[int], list[int]]] = {}
        self._recent_docs = 0
        self.extend(texts, live)

    @classmethod
    def from_packed(cls, packed: PackedPostings, k1: float = K1, b: float = B) -> Bm25Index:
        """The index ``packed`` describes, without tokenising anything (a stored snapshot's)."""
        index = cls([], k1, b)
        index._packed = packed
        index._packed_terms = {t: i for i, t in enumerate(packed.terms)}
        index.lengths = packed.lengths
        index.live = packed.live.copy()
        index.docs = len(packed.lengths)
        index.size = int(index.live.sum())
        return index

    def packed(self, docs: int | None = None) -> PackedPostings:
        """The first ``docs`` positions (all by default) as flat arrays (``from_packed`` reads them back)."""
        docs = self.docs if docs is None else docs
        terms, offsets, doc_parts, tf_parts = [], [0], [], []
        known = sorted({*self.postings, *self._packed_terms, *self._recent})
        for term in known:
            posting = self._all_postings(term)
            if posting is None:
                continue
            keep = posting[0] < docs
            if not keep.any():
                continue
            terms.append(term)
            doc_parts.append(posting[0][keep].astype(np.int32))
            tf_parts.append(posting[1][keep].astype(np.float32))
            offsets.append(offsets[-1] + int(keep.sum()))
        return PackedPostings(
            terms=terms,
            offsets=np.asarray(offsets, dtype=np.int64),
            docs=np.concatenate(doc_parts) if doc_parts else np.zeros(0, dtype=np.int32),
            tfs=np.concatenate(tf_parts) if tf_parts else np.zeros(0, dtype=np.float32),
            lengths=np.ascontiguousarray(self.lengths[:docs], dtype=np.float32),
            live=np.ascontiguousarray(self.live[:docs], dtype=bool),
        )

    @property
    def avg_length(self) -> float:
        return float(self.lengths[self.live].mean()) if self.size else 0.0

    def extend(self, texts: Sequence[str], live: Sequence[bool] | None = None) -> None:
        """Append documents (positions ``docs``, ``docs + 1``, ...); ``live[i]`` False adds a
        placeholder that is never indexed (a row without searchable text)."""
        start = self.docs
        lengths = np.zeros(len(texts), dtype=np.float32)
        flags = np.ones(len(texts), dtype=bool) if live is None else np.asarray(live, dtype=bool)
        for i, text in enumerate(texts):
            if not flags[i]:
                continue
            toks = words(text)
            lengths[i] = len(toks)
            for term, tf in Counter(toks).items():
                docs, tfs = self._recent.setdefault(term, ([], []))
                docs.append(start + i)
                tfs.append(tf)
        self.lengths = np.concatenate([self.lengths, lengths])
        self.live = np.concatenate([self.live, flags])
        self.docs += len(texts)
        self.size += int(flags.sum())
        self._recent_docs += len(texts)
        # Merged when the lists are no longer small next to the arrays (amortised O(1) per doc).
        if self._recent_docs >= max(256, self.docs // 8):
            self._merge()

    def retire(self, doc: int) -> None:
        """Take document ``doc`` out of the collection (a superseded or deleted record)."""
        if self.live[doc]:
            self.live[doc] = False
            self.size -= 1

    def _merge(self) -> None:
        for term, (docs, tfs) in self._recent.items():
            new_docs, new_tfs = np.asarray(docs, dtype=np.int64), np.asarray(tfs, dtype=np.float32)
            old = self._base(term)
            if old is not None:
                new_docs, new_tfs = np.concatenate([old[0], new_docs]), np.concatenate([old[1], new_tfs])
            self.postings[term] = (new_docs, new_tfs)
        self._recent, self._recent_docs = {}, 0

    def _base(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """The term's merged postings: from ``postings``, else from the packed arrays loaded."""
        merged = self.postings.get(term)
        if merged is None and self._packed is not None:
            at = self._packed_terms.get(term)
            if at is not None:
                lo, hi = self._packed.offsets[at], self._packed.offsets[at + 1]
                merged = self._packed.docs[lo:hi].astype(np.int64), self._packed.tfs[lo:hi]
                self.postings[term] = merged
        return merged

    def _all_postings(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """The term's documents (ascending, retired ones too) and their term frequencies."""
        merged, recent = self._base(term), self._recent.get(term)
        if recent is not None:
            extra = (np.asarray(recent[0], dtype=np.int64), np.asarray(recent[1], dtype=np.float32))
            merged = (
                extra
                if merged is None
                else (
                    np.concatenate([merged[0], extra[0]]),
                    np.concatenate([merged[1], extra[1]]),
                )
            )
        return merged

    def _posting(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """The term's live documents (ascending) and their term frequencies."""
        merged = self._all_postings(term)
        if merged is None:
            return None
        if self.size == self.docs:
            return merged
        keep = self.live[merged[0]]
        return merged[0][keep], merged[1][keep]

    def idf(self, term: str) -> float:
        """Okapi idf with the +1 inside the log (never negative, as Lucene and FTS5 avoid)."""
        posting = self._posting(term)
        return self._idf(len(posting[0]) if posting is not None else 0)

    def _idf(self, df: int) -> float:
        return math.log(1.0 + (self.size - df + 0.5) / (df + 0.5))

    def document_frequencies(
        self, terms: Sequence[str], docs: int | None = None
    ) -> tuple[int, dict[str, int]]:
        """The live documents among the first ``docs`` positions (all by default), and how many
        of them hold each of ``terms`` (stems, as the index holds them)."""
        docs = self.docs if docs is None else docs
        df = {}
        for term in terms:
            posting = self._posting(term)
            df[term] = int(np.count_nonzero(posting[0] < docs)) if posting is not None else 0
        return int(np.count_nonzero(self.live[:docs])), df

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every document for ``query`` (0 where no term matches)."""
        out = np.zeros(self.docs, dtype=np.float32)
        avg_length = self.avg_length
        if not self.size or avg_length == 0.0:
            return out
        norm = self.k1 * (1.0 - self.b + self.b * self.lengths / avg_length)
        for term in query_terms(query, stems=True):
            posting = self._posting(term)
            if posting is None or not len(posting[0]):
                continue
            docs, tfs = posting
            out[docs] += self._idf(len(docs)) * tfs * (self.k1 + 1.0) / (tfs + norm[docs])
        return out

    def top(
        self, query: str, k: int, allowed: np.ndarray | None = None, *, docs: int | None = None
    ) -> list[tuple[int, float]]:
        """(document, score) of the best ``k`` matching documents, best first.

        ``allowed`` is a boolean mask (the filters); a document with score 0
        matched no query term and is never returned. ``docs``: only the first
        ``docs`` positions (a snapshot made before later documents were added).
        """
        scores = self.scores(query)[:docs]
        matched = scores > 0
        if allowed is not None:
            matched &= allowed
        candidates = np.flatnonzero(matched)
        if not len(candidates) or k <= 0:
            return []
        # Stable order on ties (document order) so every run ranks the same.
        order = candidates[np.argsort(-scores[candidates], kind="stable")][:k]
        return [(int(i), float(scores[i])) for i in order]
