"""FTS5's own ``bm25()`` over one user's rows alone: the reference the embedded store's BM25 must equal.

The store kept FTS5 tables until schema 5 (``adapters/embedded/fts.py``); its BM25
is now scored from in-memory postings. The reference builds, in memory, the table
the store used to hold for the user: each current, live row (LTM rows only, for an
LTM search) with its text's words behind the owner prefix and a weight-0 ``tags``
column of four tokens, five with a session (tier, kind, category, scope, session:
FTS5 counts them in a row's length), and asks FTS5 to rank a MATCH of the query's
content words, each a quoted phrase.
"""

from __future__ import annotations

import sqlite3

from memstack.adapters.embedded import fts
from memstack.domain.text import query_terms
from memstack.models import Tier


def indexed_text(prefix: str, text: str) -> str:
    """The ``text`` column of a row of ``prefix``'s user: each word behind the prefix."""
    return " ".join(prefix + token for token in fts.words(text))


def match_expression(prefix: str, query: str) -> str | None:
    """An FTS5 MATCH of the query's content words (each a quoted phrase); None when it has none."""
    terms: dict[str, None] = {}
    for word in query_terms(query):
        for token in fts.words(word):
            terms.setdefault(prefix + token, None)
    if not terms:
        return None
    return "text : (" + " OR ".join(f'"{term}"' for term in terms) + ")"


def fts5_scores(
    conn: sqlite3.Connection, tenant: str, user: str, query: str, *, ltm: bool
) -> dict[int, float]:
    """FTS5's ``bm25()`` (higher is better) of each of the user's matching rows, by ``rid``."""
    uid = conn.execute(
        "SELECT uid FROM store_users WHERE tenant = ? AND user_id = ?", (tenant, user)
    ).fetchone()
    match = match_expression(fts.owner_prefix(uid[0]), query) if uid else None
    if match is None:
        return {}
    prefix = fts.owner_prefix(uid[0])
    tier = " AND tier = ?" if ltm else ""
    rows = conn.execute(
        "SELECT rid, COALESCE(search_text, content), session_id FROM memories "
        f"WHERE tenant = ? AND user_id = ? AND is_current = 1 AND deleted = 0{tier}",
        (tenant, user, *([Tier.LTM.value] if ltm else [])),
    ).fetchall()
    own = sqlite3.connect(":memory:")
    try:
        own.execute(f"CREATE VIRTUAL TABLE own USING fts5 (text, tags, tokenize = '{fts.TOKENIZER}')")
        own.executemany(
            "INSERT INTO own (rowid, text, tags) VALUES (?, ?, ?)",
            [
                (
                    rid,
                    indexed_text(prefix, text),
                    " ".join(prefix + t for t in ("t", "k", "c", "s", "x")[: 4 + (session is not None)]),
                )
                for rid, text, session in rows
            ],
        )
        found = own.execute("SELECT rowid, bm25(own, 1.0, 0.0) FROM own WHERE own MATCH ?", (match,))
        return {rid: -score for rid, score in found}
    finally:
        own.close()
