"""Okapi BM25 in pure Python + numpy, for backends without a search engine (DynamoDB).

Tokenisation is ``memstack.domain.text``: documents are indexed with every
word (``words``), queries keep only their distinct content words
(``query_terms``), exactly as the FTS5 and OpenSearch paths see them. User
text is only ever split into words, so quotes, operators or emoji are plain
characters, never syntax.

The index is built once per snapshot of a user's partition and cached by the
caller; scoring a query touches only the posting lists of its terms.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from memstack.domain.text import query_terms, words

#: term-frequency saturation (the usual Okapi default; FTS5 uses the same)
K1 = 1.2
#: document-length normalisation (the usual Okapi default; FTS5 uses the same)
B = 0.75


class Bm25Index:
    """An inverted index over ``texts``; document ``i`` is position ``i`` of the input."""

    def __init__(self, texts: Sequence[str], k1: float = K1, b: float = B) -> None:
        self.k1 = k1
        self.b = b
        self.size = len(texts)
        self.lengths = np.zeros(self.size, dtype=np.float32)
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for doc, text in enumerate(texts):
            toks = words(text)
            self.lengths[doc] = len(toks)
            for term, tf in Counter(toks).items():
                docs, tfs = postings.setdefault(term, ([], []))
                docs.append(doc)
                tfs.append(tf)
        self.postings = {
            term: (np.asarray(docs, dtype=np.int64), np.asarray(tfs, dtype=np.float32))
            for term, (docs, tfs) in postings.items()
        }
        self.avg_length = float(self.lengths.mean()) if self.size else 0.0

    def idf(self, term: str) -> float:
        """Okapi idf with the +1 inside the log (never negative, as Lucene and FTS5 avoid)."""
        df = len(self.postings[term][0]) if term in self.postings else 0
        return math.log(1.0 + (self.size - df + 0.5) / (df + 0.5))

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every document for ``query`` (0 where no term matches)."""
        out = np.zeros(self.size, dtype=np.float32)
        if not self.size or self.avg_length == 0.0:
            return out
        norm = self.k1 * (1.0 - self.b + self.b * self.lengths / self.avg_length)
        for term in query_terms(query, stems=True):
            posting = self.postings.get(term)
            if posting is None:
                continue
            docs, tfs = posting
            out[docs] += self.idf(term) * tfs * (self.k1 + 1.0) / (tfs + norm[docs])
        return out

    def top(self, query: str, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """(document, score) of the best ``k`` matching documents, best first.

        ``allowed`` is a boolean mask (the filters); a document with score 0
        matched no query term and is never returned.
        """
        scores = self.scores(query)
        matched = scores > 0
        if allowed is not None:
            matched &= allowed
        candidates = np.flatnonzero(matched)
        if not len(candidates) or k <= 0:
            return []
        # Stable order on ties (document order) so every run ranks the same.
        order = candidates[np.argsort(-scores[candidates], kind="stable")][:k]
        return [(int(i), float(scores[i])) for i in order]
