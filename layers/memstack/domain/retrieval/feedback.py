"""Pseudo-relevance feedback for BM25 (RM3-style): expand the query with words of its best hits.

A question seldom uses the words of its answer ("What activities does Melanie
partake in?" against "swimming", "pottery", "camping"), but the first BM25
hits often hold the answer's neighbours. RM3 (Abdul-Jaleel et al., 2004)
takes the top documents of the first query, weights each of their terms by
its share of the document and the document's score, and adds the best terms
to the query. Here the expanded query is a second BM25 query whose ranking
is fused with the others by weighted RRF (``weight_prf``), which plays RM3's
interpolation weight: the original ranking is kept as it was.

No store-wide statistics are needed (the stores return ids and scores only):
a term must occur in at least ``min_docs`` of the feedback documents, which
keeps the words one document happens to use out of the expansion.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from memstack.domain.text import STOPWORDS, query_index_terms, stem, words


def expansion_terms(
    query: str,
    feedback: Sequence[tuple[str, float]],
    n_terms: int,
    min_docs: int = 2,
) -> list[str]:
    """The ``n_terms`` best expansion terms from (document text, BM25 score) pairs, best first.

    Terms are words as written (each backend stems or analyses them as it does
    the query); a word sharing its stem with a query word, stopwords, numbers
    and one- or two-letter words are never added, and forms of one stem count
    as one term.
    """
    if n_terms <= 0 or not feedback:
        return []
    top = max(score for _, score in feedback) or 1.0
    own = query_index_terms(query)
    weight: dict[str, float] = {}
    docs: Counter[str] = Counter()
    surface: dict[str, str] = {}
    for text, score in feedback:
        toks = [w for w in words(text) if w not in STOPWORDS and len(w) > 2 and not w.isdigit()]
        stems = [stem(w) for w in toks]
        kept = [(w, s) for w, s in zip(toks, stems, strict=True) if s not in own]
        if not kept:
            continue
        for w, s in kept:
            surface.setdefault(s, w)
        for s, tf in Counter(s for _, s in kept).items():
            weight[s] = weight.get(s, 0.0) + (tf / len(toks)) * (score / top)
            docs[s] += 1
    # Ties go to the stem seen first, so the same hits always give the same query.
    ranked = sorted(weight, key=lambda s: -weight[s])
    return [surface[s] for s in ranked if docs[s] >= min_docs][:n_terms]


def expanded_query(query: str, terms: Sequence[str]) -> str:
    return " ".join([query, *terms]) if terms else query
