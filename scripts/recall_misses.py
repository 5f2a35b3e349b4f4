"""Why evidence misses the first k turns: where each missed evidence turn was in every stage, and what
took the first k places instead (``memstack.evaluation.misses`` says how each is decided).

Reads an evaluation's kept stores (``memstack eval … --store-dir DIR``, the same settings) and
searches every question with evidence again through the eight stages, keeping what each stage found;
the vector and BM25 stages are searched again to ``--depth`` (deeper than their own candidates, so
"how far down" is known). ``--report`` (that run's ``--json``) checks that the replay ranks as the
run did. Prints, per category and overall, the missed evidence turns by cause and where they were,
and what filled the first k turns of the questions with a miss; ``--out`` writes every miss as JSON.

    python scripts/recall_misses.py beam ../shared/data/beam/beam-500k.json.gz --conversations 11 \\
        --store-dir .cache/stores/beam --cache-dir .cache/emb --report beam.json --out misses.json
"""

from __future__ import annotations

import argparse
import json
import logging
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from memstack.domain.retrieval.stage import Models, Search
from memstack.domain.retrieval.stages.bm25 import bm25_ranking
from memstack.domain.retrieval.stages.vector import vector_search
from memstack.domain.retrieval.types import SearchRequest
from memstack.evaluation.beam import load_beam
from memstack.evaluation.embedding_cache import CachedEmbedder
from memstack.evaluation.locomo import Conversation, load_locomo
from memstack.evaluation.misses import (
    NOWHERE,
    Density,
    Fill,
    Miss,
    cause,
    cause_table,
    depth_lines,
    fill,
    fill_table,
    first_places,
)
from memstack.evaluation.recall import distinct_sources
from memstack.evaluation.runner import TENANT, USER, conversation_services, question_request
from memstack.factory import build_embedder
from memstack.models import MemoryFilters, MemoryRecord
from memstack.ports.store import pinned
from memstack.service import MemoryService
from memstack.settings import load_settings


def all_records(service: MemoryService) -> dict[str, MemoryRecord]:
    out: dict[str, MemoryRecord] = {}
    cursor: str | None = None
    while True:
        records, cursor = service.store.list(TENANT, USER, MemoryFilters(), 500, cursor)
        out.update((r.id, r) for r in records)
        if not cursor:
            return out


def traced(service: MemoryService, req: SearchRequest) -> Search:
    """The search through every stage, kept (``Retriever.search`` without its logging)."""
    retriever = service.retriever
    search = Search(
        req=req,
        store=pinned(retriever.store, req.tenant, req.user_id),
        config=retriever.config,
        models=Models(retriever.embedder, retriever.categories.of(req.categories), retriever.reranker),
    )
    for stage in retriever.stages:
        stage.run(search)
    return search


def analyse(args: argparse.Namespace) -> dict[str, Any]:
    settings = load_settings()
    model = build_embedder(settings)
    embedder = CachedEmbedder(model, args.cache_dir) if args.cache_dir else model
    load = load_beam if args.benchmark == "beam" else load_locomo
    conversations: list[Conversation] = load(args.path)[: args.conversations]
    reported: dict[tuple[str, str], list[int | None]] = {}
    if args.report:
        for entry in json.loads(args.report.read_text())["per_question"]:
            if "evidence_ranks" in entry.get("memstack", {}):
                reported[(entry["conversation"], entry["question"])] = entry["memstack"]["evidence_ranks"]
    cfg = settings.retrieval
    deep = cfg.model_copy(update={"vector_candidates": args.depth, "bm25_candidates": args.depth})
    top_k = min(settings.api.max_top_k, 2 * args.k)
    misses: list[Miss] = []
    fills: list[Fill] = []
    density = Density()
    evidence: Counter[str] = Counter()
    mismatched = 0
    for conv, service in conversation_services(conversations, settings, args.store_dir, embedder=embedder):
        records = all_records(service)
        turns = {t.dia_id: t for t in conv.turns}
        for q in conv.questions:
            if not q.evidence:
                continue
            req = question_request(conv, q.text, top_k, explain=True)
            search = traced(service, req)
            hits = [h.record for h in search.hits]
            density.add(hits, [h.stages.get("bm25_rank") is not None for h in search.hits], set(q.evidence))
            place = {t: i for i, t in enumerate(distinct_sources([h.source_ids for h in hits], top_k), 1)}
            wanted = list(dict.fromkeys(q.evidence))
            evidence[q.category_name] += len(wanted)
            known = reported.get((conv.sample_id, q.text))
            found = [place.get(e, NOWHERE) <= args.k for e in wanted]
            if known is not None and [r is not None and r <= args.k for r in known] != found:
                mismatched += 1
            if all(found):
                continue
            vec_deep, _ = vector_search(search.store, req, search.filters, search.query_vec, deep)
            search.config = deep
            bm_deep = bm25_ranking(search, req.query)
            search.config = cfg
            v_own, v_mem = first_places([h.id for h in vec_deep], records)
            b_own, b_mem = first_places([h.id for h in bm_deep], records)
            n_own, _ = first_places([h.id for h in search.neighbours], records)
            pool = search.pool
            p_own, p_mem = first_places([pool.ids[j] for j in pool.order], records)
            fills.append(fill(hits, args.k))
            for e, hit in zip(wanted, found, strict=True):
                if hit:
                    continue
                turn = turns.get(e)
                best_v = min(v_own.get(e, NOWHERE), v_mem.get(e, NOWHERE))
                best_b = min(b_own.get(e, NOWHERE), b_mem.get(e, NOWHERE))
                pooled = e in p_own or e in p_mem
                misses.append(
                    Miss(
                        category=q.category_name,
                        turn=e,
                        role=turn.role.value if turn is not None and turn.role is not None else None,
                        chars=len(turn.content) if turn is not None else 0,
                        cause=cause(
                            best_v, best_b, e in n_own, pooled, cfg.vector_candidates, cfg.bm25_candidates
                        ),
                        vector_own=v_own.get(e),
                        vector_memory=v_mem.get(e),
                        bm25_own=b_own.get(e),
                        bm25_memory=b_mem.get(e),
                        neighbour=n_own.get(e),
                        pool_own=p_own.get(e),
                        pool_memory=p_mem.get(e),
                        turn_rank=place.get(e),
                    )
                )
    lines = [f"evidence turns missed @{args.k}, by cause (memstack.evaluation.misses)"]
    lines += cause_table(misses, evidence, args.depth)
    lines += ["", *depth_lines(misses, args.k), "", *fill_table(fills, args.k)]
    lines += ["", "results of every question by place and kind, and how many brought new evidence:"]
    lines += density.table()
    if reported:
        lines.append(f"\nquestions whose misses differ from the report's: {mismatched}")
    print("\n".join(lines))
    return {
        "misses": [asdict(m) for m in misses],
        "fills": [{k: dict(v) if isinstance(v, Counter) else v for k, v in vars(f).items()} for f in fills],
        "evidence": evidence,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("benchmark", choices=("beam", "locomo"))
    parser.add_argument("path", type=Path)
    parser.add_argument("--store-dir", type=Path, required=True)
    parser.add_argument("--cache-dir", type=Path)
    parser.add_argument("--conversations", type=int)
    parser.add_argument("--report", type=Path, help="the evaluation's --json report (checks the replay)")
    parser.add_argument("--k", type=int, default=25)
    parser.add_argument(
        "--depth", type=int, default=3000, help="how deep the vector and BM25 stages are read"
    )
    parser.add_argument("--out", type=Path, help="write every missed evidence turn as JSON")
    args = parser.parse_args()
    logging.getLogger("memstack").setLevel(logging.WARNING)
    result = analyse(args)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
