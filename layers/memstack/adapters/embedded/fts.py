"""The embedded store's FTS5 index, partitioned by user inside one table.

Searches no longer read it: BM25 is scored from the postings beside each user's
index (``postings``), with the tokens this module's text produces and the
tokenizer it names. The tables are still written with every row (and erased
with the user); what follows is how they are laid out and why.

Every token a user's text puts in the index carries that user's owner prefix
(six consonants encoding the user's ``uid``): "biscuit" of user 7 is indexed
as ``cbbbbbbiscuit``. A query asks only for its own user's prefixed terms, so
FTS5 reads that user's posting lists and nothing else: BM25 is confined to
the user before ranking, and one user's search costs the same whether the
file holds one user or a thousand (``memstack bench search --users``). The
alternatives measured worse (100 users x 1,000 turns, median of 60 queries
for the top 200; one user alone in a table: 0.36 ms): MATCH, then a join
filtering on tenant and user, 12.3 ms; an indexed owner column ANDed into
the MATCH 2.3 ms; prefixed tokens 0.57 ms.

Why consonants: the porter stemmer decides by the vowel/consonant pattern of
a word, and a run of consonants in front changes neither the word's measure
nor its suffixes, so prefixed words stem as they did bare. (Tokens under
three letters, which porter used to pass through, are now stemmed too; the
query side does the same, so they still match.) The prefix has a fixed
width, so no token of one user can ever spell another user's prefix.

A second column, ``tags``, holds a few prefixed tokens per row naming what
filters ask about (tier, kind, category, scope, session). When the filters
of a search leave only a small part of the user's rows (extraction asks for
LTM memories among 100,000 raw turns), they are ANDed into the MATCH so FTS5
ranks only those rows; the column has weight 0 in ``bm25``, so scores are
the same as without it. The user's row index still filters every hit.

LTM rows are also in a second table of the same layout, ``memories_ltm_fts``,
and a search asking for LTM only (extraction's neighbours, for every queued
turn) matches there: a turn's words match nearly every raw turn of a long
history, and FTS5 reads a term's whole doclist before any tag narrows it, so
in the one table the neighbours query grew with the raw turns (~72% of an
extraction job at 100,000 memories). BM25's collection statistics are then
those of the LTM rows: an LTM-only search ranks among memories as if raw
turns were not there.

Isolation does not rest on this alone: every hit is checked against the
user's own row index before it is returned.
"""

from __future__ import annotations

import hashlib
import re

from memstack.adapters.filter_columns import CATEGORIES, KINDS, TIERS
from memstack.domain.text import query_terms
from memstack.models import MemoryFilters, Scope, Tier

#: letters the porter stemmer always treats as consonants ('y' is not one of them)
_ALPHABET = "bcdfghjklmnpqrstvwxz"
PREFIX_WIDTH = 6
MAX_UID = len(_ALPHABET) ** PREFIX_WIDTH - 1
# Letters and digits only: every token we write must stay one token for FTS5's
# unicode61 tokenizer, which splits at the underscore that ``\w`` allows.
WORD = r"[^\W_]+"
_TOKEN = re.compile(WORD, re.UNICODE)


#: the tokenizer of both tables (``database.py``) and of ``postings``' stemming
TOKENIZER = "porter unicode61"

#: every row that is current and live / LTM rows among them
MAIN, LTM = "memories_fts", "memories_ltm_fts"
TABLES = (MAIN, LTM)


def tables_of(tier: str) -> tuple[str, ...]:
    """The FTS tables a current, live row of ``tier`` is indexed in."""
    return TABLES if tier == Tier.LTM.value else (MAIN,)


def rank(table: str) -> str:
    """``bm25()`` of ``table`` with the tags column weighted 0: tags never add to a score."""
    return f"bm25({table}, 1.0, 0.0)"


def _letters(number: int, width: int) -> str:
    digits = []
    for _ in range(width):
        number, rest = divmod(number, len(_ALPHABET))
        digits.append(_ALPHABET[rest])
    return "".join(digits)


def owner_prefix(uid: int) -> str:
    """The fixed-width prefix of user ``uid`` (0 < uid <= MAX_UID)."""
    if not 0 < uid <= MAX_UID:
        raise ValueError(f"user number {uid} does not fit the FTS owner prefix")
    return _letters(uid, PREFIX_WIDTH)


def _session_tag(session_id: str) -> str:
    digest = hashlib.blake2b(session_id.encode(), digest_size=5).digest()
    return "x" + _letters(int.from_bytes(digest, "little"), 10)


def _category_tag(category: str) -> str:
    """A built-in category by its position; a tenant's own by a hash of its name (letters only)."""
    if category in CATEGORIES:
        return f"c{CATEGORIES.index(category)}"
    digest = hashlib.blake2b(category.encode(), digest_size=5).digest()
    return "cx" + _letters(int.from_bytes(digest, "little"), 10)


def row_tags(
    prefix: str, *, tier: str, kind: str, category: str | None, scope: str, session_id: str | None
) -> str:
    """The ``tags`` column of a row: its tier, kind, category, scope and session as tokens."""
    tokens = [
        f"t{TIERS.index(tier)}",
        f"k{KINDS.index(kind)}",
        _category_tag(category) if category else "cn",
        "su" if scope == Scope.USER.value else "sc",
    ]
    if session_id is not None:
        tokens.append(_session_tag(session_id))
    return " ".join(prefix + t for t in tokens)


def table_for(filters: MemoryFilters) -> str:
    """The FTS table a search with ``filters`` matches in (the LTM one when it asks for LTM only)."""
    return LTM if filters.tier is not None and str(filters.tier) == Tier.LTM.value else MAIN


def filter_expression(prefix: str, filters: MemoryFilters) -> str:
    """The search filters that tags can express (with the scope rule), as conditions on ``tags``.

    Time bounds are not tags: the row index applies them (and everything else) afterwards.
    So the scope rule is left to it when another tag narrows: nearly every row carries the
    user-scope tag, and FTS5 reads its whole doclist to intersect it (a quarter to a third
    of a neighbours search at 100k memories, for no narrowing at all).
    """
    clauses = []
    if filters.tier is not None and table_for(filters) == MAIN:  # the LTM table holds one tier
        clauses.append(f'"{prefix}t{TIERS.index(str(filters.tier))}"')
    if filters.kind is not None:
        clauses.append(f'"{prefix}k{KINDS.index(str(filters.kind))}"')
    if filters.category is not None:
        clauses.append(f'"{prefix}{_category_tag(str(filters.category))}"')
    if filters.scope == Scope.CONTEXT:
        clauses.append(f'"{prefix}sc"')
    if not clauses:  # otherwise the row index applies the scope rule
        own_session = filters.session_id is not None and filters.scope != Scope.USER
        session = f'("{prefix}su" OR "{prefix}{_session_tag(filters.session_id or "")}")'
        clauses.append(session if own_session else f'"{prefix}su"')
    return " AND ".join(f"tags : {c}" for c in clauses)


def words(text: str) -> list[str]:
    """The words of ``text`` the index holds (each prefixed, then tokenised by FTS5)."""
    return _TOKEN.findall(text.lower())


def indexed_text(prefix: str, text: str) -> str:
    """What goes into the FTS5 ``text`` column for this user's ``text``."""
    return " ".join(prefix + token for token in words(text))


def match_expression(prefix: str, query: str) -> str | None:
    """An FTS5 MATCH of the query's content words, this user's tokens only (None if it has none).

    Every term is a double-quoted string, so nothing a user types is query syntax.
    """
    terms: dict[str, None] = {}
    for word in query_terms(query):
        for token in _TOKEN.findall(word):
            terms.setdefault(prefix + token, None)
    if not terms:
        return None
    # The column filter keeps a word from ever matching a tag.
    return "text : (" + " OR ".join(f'"{term}"' for term in terms) + ")"
