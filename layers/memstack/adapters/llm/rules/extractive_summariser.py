"""The offline summariser: extractive, by sentence centrality over TF-IDF vectors (LexRank).

No model and no network: each input is split into sentences, sentences are
weighted by how central they are in the similarity graph of all sentences
(the ones that say what the others say), and the most central are kept, in
their original order, skipping near-repeats, until the token budget is
spent. The same input always gives the same output, so a consolidation run
repeated over the same turns writes the same text.

``synthesise`` runs the same ranking over related summaries plus the existing
memories they relate to and keeps the statements central to all of them:
extractive synthesis cannot coin "an ML practitioner who mainly uses
PyTorch", but it does pick the sentences that the evidence agrees on.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from memstack.domain.text import STOPWORDS, words
from memstack.models import MemoryRecord

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from memstack.settings import Settings

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")
_SPEAKER = re.compile(r"^([A-Z][\w .'-]{0,40}):\s+")
_TOKEN = re.compile(r"\w+|[^\w\s]")


def estimate_tokens(text: str) -> int:
    """Tokens as subword models count them, roughly: words and punctuation marks, long words twice."""
    return sum(1 + len(t) // 8 for t in _TOKEN.findall(text))


def split_sentences(text: str) -> list[str]:
    """Sentences of one turn; a leading ``Speaker:`` is carried onto each so none loses who said it."""
    text = " ".join(text.split())
    speaker = ""
    if m := _SPEAKER.match(text):
        speaker, text = m.group(0), text[m.end() :]
    out = []
    for sentence in (s.strip() for s in _SENTENCE.split(text)):
        if sentence:
            out.append(sentence if _SPEAKER.match(sentence) else speaker + sentence)
    return out


def join(sentences: list[str]) -> str:
    """Sentences as one text, naming a speaker once per run of their sentences."""
    parts, last = [], None
    for sentence in sentences:
        m = _SPEAKER.match(sentence)
        speaker = m.group(0) if m else None
        parts.append(sentence[m.end() :] if m and speaker == last else sentence)
        last = speaker
    return " ".join(parts)


def _tfidf(sentences: list[str]) -> np.ndarray:
    docs = [[w for w in words(s) if w not in STOPWORDS] or words(s) for s in sentences]
    vocab = {w: i for i, w in enumerate(sorted({w for d in docs for w in d}))}
    matrix = np.zeros((len(docs), max(len(vocab), 1)), dtype=np.float64)
    df = np.zeros(max(len(vocab), 1))
    for row, doc in enumerate(docs):
        for w in doc:
            matrix[row, vocab[w]] += 1.0
        for w in set(doc):
            df[vocab[w]] += 1.0
    idf = np.log((1.0 + len(docs)) / (1.0 + df)) + 1.0
    matrix *= idf
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def centrality(sentences: list[str], damping: float = 0.85, threshold: float = 0.1) -> np.ndarray:
    """LexRank scores: the stationary distribution of a walk over the sentence-similarity graph."""
    n = len(sentences)
    if n == 1:
        return np.ones(1)
    vectors = _tfidf(sentences)
    sim = vectors @ vectors.T
    graph = (sim >= threshold).astype(np.float64)
    degree = graph.sum(axis=1, keepdims=True)
    transition = graph / degree  # every row has its self-loop, so no zero degree
    scores = np.full(n, 1.0 / n)
    for _ in range(100):
        updated = (1.0 - damping) / n + damping * transition.T @ scores
        if np.abs(updated - scores).sum() < 1e-9:
            return updated
        scores = updated
    return scores


def select(sentences: list[str], max_tokens: int, redundancy: float = 0.8) -> str:
    """The most central sentences, in their original order, within ``max_tokens``."""
    unique = list(dict.fromkeys(s for s in sentences if s))
    if not unique:
        return ""
    scores = centrality(unique)
    vectors = _tfidf(unique)
    # Ties go to the earlier sentence, so the result never depends on sort stability.
    order = sorted(range(len(unique)), key=lambda i: (-round(float(scores[i]), 12), i))
    chosen: list[int] = []
    used = 0
    for i in order:
        if any(float(vectors[i] @ vectors[j]) >= redundancy for j in chosen):
            continue
        cost = estimate_tokens(unique[i])
        if used + cost > max_tokens:
            continue
        chosen.append(i)
        used += cost
    if not chosen:  # even the best sentence is over budget: keep its beginning
        return truncate(unique[order[0]], max_tokens)
    return join([unique[i] for i in sorted(chosen)])


def truncate(text: str, max_tokens: int) -> str:
    out: list[str] = []
    used = 0
    for word in text.split():
        cost = estimate_tokens(word)
        if used + cost > max_tokens:
            break
        out.append(word)
        used += cost
    return " ".join(out) + (" …" if len(out) < len(text.split()) else "")


class ExtractiveSummariser:
    name = "extractive-lexrank"

    def summarise(self, texts: list[str], max_tokens: int) -> str:
        return select([s for t in texts for s in split_sentences(t)], max_tokens)

    def synthesise(self, summaries: list[str], existing: list[MemoryRecord], max_tokens: int) -> list[str]:
        sentences = [s for t in summaries for s in split_sentences(t)]
        sentences += [s for r in existing if not r.deleted for s in split_sentences(r.content)]
        text = select(sentences, max_tokens)
        return [text] if text else []


def build(settings: Settings, clients: Mapping[str, Any]) -> ExtractiveSummariser:
    """``MEMSTACK_LLM=local`` (``factory.SUMMARISERS``)."""
    return ExtractiveSummariser()
