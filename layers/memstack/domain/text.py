"""Text helpers shared by every BM25 implementation (SQLite FTS5, in-Lambda, OpenSearch).

Stemming: SQLite FTS5 indexes with its ``porter`` tokenizer, so "camping"
finds "camped". The in-Lambda index (``domain.bm25``, the DynamoDB backend)
does the same with the Snowball English stemmer (``bm25_document`` for the
documents, ``query_terms(..., stems=True)`` for the query), so both backends
match the same word forms. OpenSearch analyses the raw text with its own
analyser.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import types
from functools import lru_cache
from typing import Any

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


#: where snowballstemmer's English module is loaded (see ``_english_stemmer``); nothing else uses the name
_SNOWBALL_ENGLISH_ONLY = "_memstack_snowball_english"


def _english_stemmer() -> Any:
    """snowballstemmer's own ``EnglishStemmer``, without the rest of the package.

    ``import snowballstemmer`` runs the package's ``__init__``, which imports the stemmers of all
    its 35 languages to offer ``stemmer(name)``: about 18 ms of every Lambda cold start, for one
    language. Here the package's directory is mounted as a private package whose ``__init__`` never
    runs, and only ``english_stemmer`` (with the ``basestemmer`` and ``among`` it imports) is
    loaded from it: the same files and bytecode, so the same stems, and ``snowballstemmer`` itself
    is untouched for anything else that imports it.
    """
    spec = importlib.util.find_spec("snowballstemmer")
    if spec is None or not spec.submodule_search_locations:
        # the name lets the command line say which extra brings it (memstack.extras)
        raise ModuleNotFoundError("No module named 'snowballstemmer'", name="snowballstemmer")
    package = sys.modules.get(_SNOWBALL_ENGLISH_ONLY)
    if package is None:
        package = types.ModuleType(_SNOWBALL_ENGLISH_ONLY)
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules[_SNOWBALL_ENGLISH_ONLY] = package
    return importlib.import_module(f"{_SNOWBALL_ENGLISH_ONLY}.english_stemmer").EnglishStemmer()


_STEMMER = _english_stemmer()


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
