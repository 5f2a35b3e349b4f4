"""BM25 over one user's own rows, from postings held in memory beside the user's index.

FTS5 ranked a search among every user's rows of the shared table: its row count,
average length and document frequencies were the file's, so another user's words
changed my scores (and an LTM search among raw turns cost what the whole table
held). Here the collection is the user's own: the rows FTS5 would have matched for
them (current and live; LTM rows only for an LTM search, ``fts.table_for``), with
FTS5's own ``bm25()`` formula and constants, its tokens and its per-phrase sum,
so a user's scores are exactly those ``bm25()`` gives over a table of that user's
rows alone (tests/unit/test_embedded_bm25.py). The file holds no FTS5 table since
schema 5: nothing read them once these postings scored every search.

Tokens are FTS5's: each word (``fts.words``) is tokenised and stemmed by SQLite's
own ``porter unicode61`` tokenizer, in an in-memory table read through ``fts5vocab``
(one per thread, rolled back after each call), and remembered per user (``Stems``):
nothing of a user's text is kept outside that user's index, which erase drops. Every word carries the same
owner prefix FTS5's words carried, since porter reads a leading 'y' differently
after consonants.

Postings are append-only, like the index's rows: a term's arrays are replaced
(never changed) when rows are added, and a reader ignores rows past its view's
end. Which rows count (current, live, LTM) is read from the view's columns at
search time, so an update or a delete changes no posting.
"""

from __future__ import annotations

import itertools
import math
import re
import sqlite3
import threading
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from memstack.adapters.embedded import fts
from memstack.domain.text import query_terms

#: ``bm25()``'s constants in FTS5 (fts5_aux.c)
K1, B = 1.2, 0.75
#: the prefix every word is stemmed with: any owner prefix stems alike (six consonants)
_PREFIX = fts.owner_prefix(1)
#: words remembered per user before the memo starts over (a memo miss costs one SQLite call)
_STEMS_KEPT = 200_000
#: queries whose phrases are remembered per user (a word's term number never changes)
_QUERIES_KEPT = 64

Terms = tuple[int, ...]
#: what separates rows' texts in one pass of the word pattern (never part of a word)
_BREAK = "\x00"
_WORD_OR_BREAK = re.compile(f"{fts.WORD}|{_BREAK}")


#: each thread's in-memory FTS5 table for ``_tokenise`` (opening one and creating its two tables
#: cost ~400 µs, more than the tokenising of a search's few new words)
_tokeniser = threading.local()


def _tokenise(words: Sequence[str]) -> list[list[str]]:
    """FTS5's tokens of each word, as ``porter unicode61`` makes them (usually one per word)."""
    conn = _tokenise_connection()
    # The words go in and their tokens come out in one transaction, rolled back: the table is
    # empty again after every call (a rollback costs less than deleting the rows).
    conn.execute("BEGIN")
    try:
        conn.executemany("INSERT INTO w (rowid, word) VALUES (?, ?)", enumerate(_PREFIX + w for w in words))
        found: list[list[str]] = [[] for _ in words]
        for doc, term in conn.execute("SELECT doc, term FROM v ORDER BY doc, offset"):
            found[doc].append(term)
        return found
    finally:
        conn.execute("ROLLBACK")


def _tokenise_connection() -> sqlite3.Connection:
    """This thread's throw-away table (in memory, never a file: it holds only the words being stemmed)."""
    conn: sqlite3.Connection | None = getattr(_tokeniser, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.execute(f"CREATE VIRTUAL TABLE w USING fts5 (word, tokenize = '{fts.TOKENIZER}')")
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab (w, 'instance')")
        _tokeniser.conn = conn
    return conn


class Stems:
    """One user's words and their FTS5 tokens (as term numbers), asked of SQLite once per word."""

    def __init__(self) -> None:
        #: every term of the user's words: its number (the key of its postings)
        self.numbers: dict[str, int] = {}
        self._memo: dict[str, Terms] = {}
        #: the words of ``_memo`` that are exactly one token (nearly all), as that token's number,
        #: and the break between rows' texts as -1 (``TextIndex.append`` maps every token at once)
        self._single: dict[str, int] = {_BREAK: -1}
        #: the phrases of the queries asked lately (a search asks twice: BM25, then its term counts)
        self._queries: dict[str, list[int]] = {}
        self._lock = threading.Lock()

    def of(self, words: Collection[str]) -> dict[str, Terms]:
        """The term numbers of each word (every word given, tokenised in one call when new)."""
        memo, single = self._memo, self._single
        new = list(dict.fromkeys(w for w in words if w not in memo))
        if new:
            if len(memo) + len(new) > _STEMS_KEPT:  # start over, with what this call asks for
                memo, single = {}, {_BREAK: -1}
                new = list(dict.fromkeys(words))
            tokens = _tokenise(new)
            with self._lock:
                numbers = self.numbers
                for word, terms in zip(new, tokens, strict=True):
                    ids = tuple(numbers.setdefault(t, len(numbers)) for t in terms)
                    memo[word] = ids
                    if len(ids) == 1:
                        single[word] = ids[0]
                self._memo, self._single = memo, single
        return memo

    def single(self) -> dict[str, int]:
        """The words known to be one token, and its number (every word ``of`` was just given)."""
        return self._single

    def query(self, query: str) -> list[int]:
        """The query's phrases as an FTS5 MATCH of its content words would match them, one term each.

        Distinct words in order; two words with one stem are two phrases, as in FTS5.
        A word FTS5 would split in two (a character SQLite's tokenizer does not count as
        a letter) counts as its tokens, each its own phrase, not as an adjacent pair.
        """
        known = self._queries.get(query)
        if known is not None:
            return list(known)
        words = list(dict.fromkeys(t for word in query_terms(query) for t in fts.words(word)))
        memo = self.of(words)
        phrases = [term for w in words for term in memo[w]]
        if len(self._queries) >= _QUERIES_KEPT:
            self._queries = {}
        self._queries[query] = phrases
        return list(phrases)


@dataclass(frozen=True)
class Posting:
    rows: np.ndarray  # int64, ascending
    tf: np.ndarray  # float64: occurrences of the term in each row


class Postings:
    """The terms of the rows of one FTS table's share of the user (every row, or LTM rows)."""

    def __init__(self) -> None:
        self.terms: dict[int, Posting] = {}

    def add(self, term_ids: np.ndarray, rows: np.ndarray, counts: np.ndarray) -> None:
        """Add (term, row, count) triples sorted by term then row.

        Rows are past the end of every posting: each term's rows stay ascending.
        """
        if not len(rows):
            return
        bounds = [0, *(np.flatnonzero(np.diff(term_ids)) + 1).tolist(), len(rows)]
        terms = self.terms
        for a, b, term in zip(bounds[:-1], bounds[1:], term_ids[bounds[:-1]].tolist(), strict=True):
            old = terms.get(term)
            new_rows, new_tf = rows[a:b], counts[a:b]
            if old is not None:  # fresh arrays: a view reading the old ones keeps them
                new_rows, new_tf = np.concatenate((old.rows, new_rows)), np.concatenate((old.tf, new_tf))
            terms[term] = Posting(new_rows, new_tf)


class TextIndex:
    """A user's postings (all rows, LTM rows) and each row's length in FTS5 tokens."""

    def __init__(self, capacity: int) -> None:
        self.stems = Stems()
        self.main = Postings()
        self.ltm = Postings()
        #: tokens per row: its text's plus its tags' (FTS5's document length counts both columns)
        self.length = np.zeros(capacity, dtype=np.int64)

    def grow(self, capacity: int) -> None:
        length = np.zeros(capacity, dtype=np.int64)
        length[: len(self.length)] = self.length
        self.length = length

    def append(self, start: int, texts: Sequence[str], tags: Sequence[int], ltm: Sequence[bool]) -> None:
        """Rows ``start`` onwards: their texts, how many tag tokens each has, which are LTM."""
        end = start + len(texts)
        # One pass of the pattern over every text, a break between texts (rows of 100,000
        # memories are ~1.5 million words: per-text and per-word Python steps add up).
        tokens = _WORD_OR_BREAK.findall(_BREAK.join(texts).lower())
        distinct = set(tokens)
        distinct.discard(_BREAK)
        memo = self.stems.of(distinct)
        single = self.stems.single()
        # Every word one token (nearly always). The keys view asked of the set, not set.issubset:
        # that copies its argument into a set first, the user's whole vocabulary on every write.
        if single.keys() >= distinct:
            numbers = np.fromiter(map(single.__getitem__, tokens), dtype=np.int64, count=len(tokens))
            breaks = np.flatnonzero(numbers < 0)
            per_row = np.diff(breaks, prepend=-1, append=len(tokens)) - 1
            ids = numbers[numbers >= 0]
        else:
            rows_tokens = [[t for w in fts.words(text) for t in memo[w]] for text in texts]
            ids = np.fromiter(itertools.chain.from_iterable(rows_tokens), dtype=np.int64)
            per_row = np.fromiter(map(len, rows_tokens), dtype=np.int64, count=len(rows_tokens))
        self.length[start:end] = per_row + np.asarray(tags, dtype=np.int64)
        if not len(ids):
            return
        rows = np.repeat(np.arange(start, end, dtype=np.int64), per_row)
        pairs, counts = np.unique(ids * end + rows, return_counts=True)
        term_ids, rows = np.divmod(pairs, end)  # by term, then row
        tf = counts.astype(np.float64)
        self.main.add(term_ids, rows, tf)
        is_ltm = np.asarray(ltm, dtype=bool)[rows - start]
        if is_ltm.any():
            self.ltm.add(term_ids[is_ltm], rows[is_ltm], tf[is_ltm])


def document_frequencies(postings: Postings, terms: Iterable[int], member: np.ndarray) -> dict[int, int]:
    """How many rows of the collection (``member``, the view's size) hold each term."""
    size = len(member)
    out = {}
    for term in terms:
        posting = postings.terms.get(term)
        rows = posting.rows if posting is not None else np.zeros(0, dtype=np.int64)
        if len(rows) and rows[-1] >= size:  # rows added after the view: not in it
            rows = rows[: int(np.searchsorted(rows, size))]
        out[term] = int(np.count_nonzero(member[rows]))
    return out


def bm25(
    postings: Postings,
    phrases: list[int],
    member: np.ndarray,
    length: np.ndarray,
    allowed: np.ndarray,
    df: dict[int, int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """FTS5's ``bm25()`` (positive: higher is better) of every allowed row matching a phrase.

    ``member``: the rows of the collection (its size is the view's); ``length``: their
    lengths in tokens. Returns the rows (ascending) and their scores. ``df``: filled with each
    phrase's rows in the collection (``document_frequencies``' answer) once scoring starts.
    """
    size = len(member)
    n_rows = int(member.sum())
    if not n_rows or not phrases:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    avgdl = float(int(length[member].sum())) / float(n_rows)
    score: np.ndarray | None = None
    hit = np.zeros(size, dtype=bool)
    for term in phrases:
        posting = postings.terms.get(term)
        if posting is None:
            if df is not None:
                df[term] = 0
            continue
        rows, tf = posting.rows, posting.tf
        if len(rows) and rows[-1] >= size:  # rows added after the view: not in it
            end = int(np.searchsorted(rows, size))
            rows, tf = rows[:end], tf[:end]
        keep = member[rows]
        rows, tf = rows[keep], tf[keep]
        n_hit = len(rows)
        if df is not None:
            df[term] = n_hit
        if not n_hit:
            continue
        # As fts5_aux.c computes it, operation for operation, in double precision.
        idf = math.log((n_rows - n_hit + 0.5) / (n_hit + 0.5))
        if idf <= 0.0:
            idf = 1e-6
        d = length[rows].astype(np.float64)
        part = idf * ((tf * (K1 + 1.0)) / (tf + K1 * (1 - B + B * d / avgdl)))
        if score is None:
            score = np.zeros(size)
        score[rows] += part
        hit[rows] = True
    if score is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    found = np.flatnonzero(hit & allowed)
    return found, score[found]
