"""What a tenant lets memstack remember: every extractor's and consolidation's result held to its rules.

``screen`` runs on the operations any extractor (offline rules, Bedrock, an
OpenAI-compatible server) or consolidation decided, before anything is
written:

- a memory is filed under one of the tenant's categories: one the tenant does
  not have (a model's slip, consolidation's built-in grouping under
  ``mode: replace``), or none where the tenant has categories of its own, is
  filed by the tenant's lexicon;
- ``extraction.ignore``: a write (ADD, UPDATE, CONFLICT) whose category is
  ignored, whose text the lexicon files under an ignored category, or whose
  text holds an ignored keyword, is dropped (for an UPDATE the memory keeps
  its old text; for a CONFLICT the contradicted memory stays unflagged);
- ``extraction.only``: when it names anything, a write is kept only if its
  category or its text's category is one of them, or its text holds one of
  its keywords.

DELETE and NONE pass: forgetting is never held back. Keywords match as
category keywords do (a word with its inflections, a phrase literally,
any case). What the rules cannot see is meaning: "never store health data"
as free text is for models (``extraction.instructions``); the offline
extractor honours only what the rules name.
"""

from __future__ import annotations

import re
from functools import lru_cache

from memstack.domain.categories import Lexicon, lexicon_for, term_pattern
from memstack.domain.tenant.config import TenantConfig, TopicRules
from memstack.domain.tenant.guidance import guidance_of
from memstack.ports.llm import ExtractionOp, OpName

#: the operations that write a memory's text (a CONFLICT writes the contradicting statement)
_WRITES: frozenset[OpName] = frozenset({"ADD", "UPDATE", "CONFLICT"})


@lru_cache(maxsize=512)
def _keywords(terms: tuple[str, ...]) -> re.Pattern[str] | None:
    if not terms:
        return None
    return re.compile("|".join(f"(?:{term_pattern(t.lower())})" for t in terms), re.IGNORECASE)


def _matches(rules: TopicRules, filed: set[str], text: str) -> bool:
    pattern = _keywords(tuple(rules.keywords))
    return bool(filed & set(rules.categories)) or (pattern is not None and bool(pattern.search(text)))


def _filed(op: ExtractionOp, lexicon: Lexicon) -> set[str]:
    """The categories a memory is about: the one it was given and the one its words speak to."""
    by_words = lexicon.categorise(op.content or "")
    return {c for c in (op.category, by_words) if c is not None}


def screen(config: TenantConfig, ops: list[ExtractionOp]) -> list[ExtractionOp]:
    """``ops`` filed under the tenant's categories, without what its ignore / only rules leave out."""
    allowed = set(config.categories.names())
    lexicon = lexicon_for(guidance_of(config))
    ignore, only = config.extraction.ignore, config.extraction.only
    kept = []
    for op in ops:
        if op.op not in _WRITES:
            kept.append(op)
            continue
        # A tenant with categories of its own has every memory filed (a model may leave it out);
        # without, an unfiled memory stays as the extractor left it.
        unfiled = op.category is None and bool(config.categories.custom)
        if unfiled or (op.category is not None and op.category not in allowed):
            op = op.model_copy(
                update={"category": lexicon.categorise(op.content or "") or lexicon.fallback(op.kind)}
            )
        filed, text = _filed(op, lexicon), op.content or ""
        if _matches(ignore, filed, text):
            continue
        if not only.empty() and not _matches(only, filed, text):
            continue
        kept.append(op)
    return kept
