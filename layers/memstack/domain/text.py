"""Text helpers shared by every BM25 implementation (SQLite FTS5, in-Lambda, OpenSearch).

Stemming: SQLite FTS5 indexes with its ``porter`` tokenizer, so "camping"
finds "camped". The in-Lambda index (``domain.bm25``, the DynamoDB backend)
does the same with the Snowball English stemmer (``bm25_document`` for the
documents, ``query_terms(..., stems=True)`` for the query), so both backends
match the same word forms. OpenSearch analyses the raw text with its own
analyser.
"""

from __future__ import annotations

import re
from functools import lru_cache

import snowballstemmer

_WORD = re.compile(r"\w+", re.UNICODE)

# Function words carry no topical signal; dropping them from queries keeps
# BM25 from rewarding a turn for sharing "what did you" with the question.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves s t don ve ll re d m
    """.split()  # noqa: SIM905 - a word list reads best as words
)


_STEMMER = snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Snowball English stem of one lower-cased word (cached: a user's vocabulary repeats)."""
    return str(_STEMMER.stemWord(word))


def words(text: str) -> list[str]:
    """Lower-cased word tokens."""
    return [w.lower() for w in _WORD.findall(text)]


def bm25_document(text: str) -> str:
    """A record's text as the in-Lambda BM25 index holds it: its words' stems."""
    return " ".join(stem(w) for w in words(text))


def index_terms(text: str) -> set[str]:
    """The distinct stems of ``text``'s words."""
    return {stem(w) for w in words(text)}


def query_index_terms(text: str) -> set[str]:
    """The stems of the query's content words (all its words if every one is a stopword)."""
    toks = words(text)
    return {stem(w) for w in [w for w in toks if w not in STOPWORDS] or toks}


def query_terms(text: str, max_terms: int = 64, stems: bool = False) -> list[str]:
    """Distinct content words of a query, in order; all words if every one is a stopword.

    With ``stems``, each word is followed by its stem: what the in-Lambda
    index, which holds stems, is queried with (FTS5 and OpenSearch stem or
    analyse the words themselves).
    """
    toks = words(text)
    content = [w for w in toks if w not in STOPWORDS] or toks
    seen: dict[str, None] = {}
    for w in content:
        seen.setdefault(w, None)
        if stems:
            seen.setdefault(stem(w), None)
    return list(seen)[:max_terms]


def fts5_match(text: str) -> str | None:
    """An FTS5 MATCH expression that treats every term as a literal string.

    Each term is double-quoted (quotes inside doubled), so apostrophes, ``AND``,
    ``NEAR``, ``*`` or ``:`` in user text are plain text, never syntax.
    """
    terms = query_terms(text)
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
