"""The tokens of the embedded store's BM25: FTS5's tokenizer, an owner prefix, and the two collections.

BM25 is scored from the postings beside each user's index (``postings``) with
FTS5's own formula. The file kept FTS5 tables too until schema 5: they were
written with every row and, once the postings scored every search, read by
none, so they are gone (``database.create_or_upgrade`` drops them from older
files). What stays is how text becomes tokens, as FTS5 made them:

- ``words``: the words of a text (letters and digits, lower case), each one
  token for FTS5's ``unicode61`` tokenizer, which splits at the underscore
  that ``\\w`` allows;
- each word is stemmed by SQLite's own ``porter unicode61`` tokenizer
  (``TOKENIZER``) with a fixed six-consonant prefix in front (``owner_prefix``).
  The tables prefixed each user's tokens with that user's own prefix, so one
  user's posting lists were separate from another's. The porter stemmer decides
  by the vowel/consonant pattern of a word, and a run of consonants in front
  changes neither the word's measure nor its suffixes, except that a leading
  'y' reads differently after consonants: the postings stem with a prefix so
  their stems are exactly the ones FTS5's ``bm25()`` scored.

A search ranks among one of two collections of the user's rows (``table_for``):
every current, live row (``MAIN``), or the LTM ones alone (``LTM``), so a
search of LTM memories (extraction's neighbours, for every queued turn) ranks
among memories as if raw turns were not there, as the LTM table it replaces did.
"""

from __future__ import annotations

import re

from memstack.models import MemoryFilters, Tier

#: letters the porter stemmer always treats as consonants ('y' is not one of them)
_ALPHABET = "bcdfghjklmnpqrstvwxz"
PREFIX_WIDTH = 6
MAX_UID = len(_ALPHABET) ** PREFIX_WIDTH - 1
# Letters and digits only: every token must stay one token for FTS5's unicode61
# tokenizer, which splits at the underscore that ``\w`` allows.
WORD = r"[^\W_]+"
_TOKEN = re.compile(WORD, re.UNICODE)


#: the tokenizer ``postings`` stems every word with (the dropped tables' own)
TOKENIZER = "porter unicode61"

#: the two collections a search ranks among: every current, live row / its LTM rows
MAIN, LTM = "memories_fts", "memories_ltm_fts"
#: the FTS5 tables of files before schema 5 (``database.create_or_upgrade`` drops them)
DROPPED_TABLES = (MAIN, LTM)


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


def table_for(filters: MemoryFilters) -> str:
    """The collection a search with ``filters`` ranks among (``LTM`` when it asks for LTM only)."""
    return LTM if filters.tier is not None and str(filters.tier) == Tier.LTM.value else MAIN


def words(text: str) -> list[str]:
    """The words of ``text`` the postings hold (each then stemmed as FTS5 stems it)."""
    return _TOKEN.findall(text.lower())
