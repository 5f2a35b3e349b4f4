"""Give the raw turns of kept evaluation stores the passages an ingest would write now.

``memstack eval beam|locomo --store-dir DIR`` keeps one store per conversation
(``DIR/<id>/``). Passages (``MEMSTACK_INDEX_PASSAGE_CHARS``, domain/chunks.py) are
vector-only records that nothing else reads (not extraction, not BM25), so a store
ingested without them becomes the store an ingest with them would have written by
adding each long turn's passages, as ``ingest.with_passages`` makes them, and
writing the new ingest fingerprint: the eval then reuses it instead of ingesting
again (hours of extraction on BEAM on a shared machine).

    MEMSTACK_INDEX_PASSAGE_CHARS=1200 python scripts/add_passages.py DIR --cache-dir .cache/emb
    MEMSTACK_INDEX_PASSAGE_CHARS=1200 memstack eval beam FILE --store-dir DIR ...

Run it on a copy: the stores are changed in place.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from memstack.domain.chunks import is_passage_id
from memstack.domain.ingest import with_passages
from memstack.domain.vectors import coarse_prefix
from memstack.evaluation.embedding_cache import CachedEmbedder
from memstack.evaluation.runner import TENANT, USER, ingest_fingerprint
from memstack.factory import build_embedder, build_service
from memstack.models import MemoryFilters, Message, Role, Tier
from memstack.settings import Settings


def add(data_dir: Path, settings: Settings, embedder: CachedEmbedder, infer: bool) -> int:
    service = build_service(settings.model_copy(update={"data_dir": data_dir}), embedder=embedder)
    try:
        turns, cursor = [], None
        while True:
            page, cursor = service.store.list(TENANT, USER, MemoryFilters(tier=Tier.STM), 500, cursor)
            turns += [r for r in page if not is_passage_id(r.id)]
            if not cursor:
                break
        made = []
        for record in turns:
            role = record.metadata.get("role", Role.USER)
            part = Message(
                id=record.source_ids[0],
                role=role if role in set(Role) else Role.USER,
                speaker=record.speaker,
                content=record.content,
            )
            made += with_passages(record, part, "", settings.ingest)[1:]
        if made:
            vectors = embedder.embed([text for _, text in made])
            coarse_dim = settings.embedding.coarse_dim
            service.store.put(
                [
                    r.model_copy(
                        update={
                            "embedding_full": np.asarray(v, dtype=np.float32).tolist(),
                            "embedding_coarse": coarse_prefix(np.asarray(v), coarse_dim).tolist(),
                        }
                    )
                    for (r, _), v in zip(made, vectors, strict=True)
                ]
            )
        (data_dir / "ingest.json").write_text(json.dumps(ingest_fingerprint(settings, infer, False)))
        return len(made)
    finally:
        service.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("store_dir", type=Path)
    parser.add_argument("--cache-dir", type=Path, required=True)
    parser.add_argument("--raw", action="store_true", help="the stores were made with --raw")
    args = parser.parse_args()
    settings = Settings()
    if not settings.ingest.passage_chars:
        raise SystemExit("set MEMSTACK_INDEX_PASSAGE_CHARS")
    embedder = CachedEmbedder(build_embedder(settings), args.cache_dir)
    wanted = ingest_fingerprint(settings, not args.raw, False)
    for data_dir in sorted(p for p in args.store_dir.iterdir() if (p / "ingest.json").exists()):
        if json.loads((data_dir / "ingest.json").read_text()) == wanted:
            continue  # done already
        print(data_dir.name, add(data_dir, settings, embedder, not args.raw), "passages", flush=True)
    embedder.close()


if __name__ == "__main__":
    main()
