"""Install the built memstack wheel as a user would, one extra per clean virtualenv, and use it.

``make test-install`` (CI runs it before ``make test``):

1. build the sdist, and the wheel from that sdist (so the sdist is complete too);
2. ``server,local``: a fresh venv installs the wheel with those extras, fetches the MiniLM
   model with ``memstack models install minilm``, runs ``memstack ingest --sync`` and
   ``memstack search`` on examples/conversation.jsonl, then serves it (``memstack serve``);
3. ``client``: a fresh venv with only the client extra (no numpy, no AWS SDK, no CLI) stores
   and searches through the live server above on loopback; its ``memstack`` command answers
   ``--version`` and names the missing extra for ``serve`` in one line;
4. ``integrations``: a fresh venv lists the MCP tools of ``memstack mcp`` over stdio.

Each venv installs from the wheel, never the checkout, with requirements-dev.txt as
constraints (the versions CI tests), by uv (its cache makes the installs quick). Prints each
step's time and each venv's installed size. ``--sizes`` instead measures every extra alone
(the README's table). Work files live in build/install-check/.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers")]

from memstack import __version__  # noqa: E402
from memstack.bench.server_process import API_KEY, ServerProcess  # noqa: E402

from scripts.lock import uv  # noqa: E402

WORK = ROOT / "build" / "install-check"
CONSTRAINTS = ROOT / "requirements-dev.txt"
EXTRAS = ("client", "server", "local", "mpnet", "aws", "opensearch", "postgres", "integrations", "plot")
TIMINGS: list[tuple[str, float]] = []


@contextmanager
def step(name: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    TIMINGS.append((name, time.perf_counter() - start))
    print(f"  {name}: {TIMINGS[-1][1]:.1f} s", flush=True)


def run(cmd: list[str], env: dict[str, str] | None = None, **kw: object) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, **kw)  # type: ignore[call-overload]
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return str(done.stdout)


def clean_env(data_dir: Path, **memstack: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTACK_", "VIRTUAL_ENV", "PYTHON"))}
    env["MEMSTACK_DATA_DIR"] = str(data_dir)
    env.update({f"MEMSTACK_{k.upper()}": v for k, v in memstack.items()})
    return env


def build_dists() -> Path:
    dist = WORK / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    # --no-isolation: the build backend pinned in requirements-dev.txt, no download.
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT)])
    return next(dist.glob("memstack-*.whl"))


def site_size(venv: Path) -> int:
    site = next((venv / "lib").glob("python3*/site-packages"))
    return sum(p.stat().st_size for p in site.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def venv_with(name: str, wheel: Path, extras: str) -> Path:
    venv = WORK / "venvs" / name
    shutil.rmtree(venv, ignore_errors=True)
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    spec = f"{wheel}[{extras}]" if extras else str(wheel)
    # uv (the dev extra) resolves and installs in seconds where pip took minutes here (543 s for
    # `integrations` at load 16, against 20 s); its cache is kept between runs. The venv itself
    # comes from `python -m venv`, so it has pip, as a user's has (`memstack models install` uses it).
    run([uv(), "pip", "install", "--quiet", "--python", str(python), spec, "-c", str(CONSTRAINTS)])
    return venv


def empty_venv_size() -> int:
    venv = WORK / "venvs" / "empty"
    shutil.rmtree(venv, ignore_errors=True)
    run([sys.executable, "-m", "venv", str(venv)])
    return site_size(venv)


def server_and_local(wheel: Path, data: Path) -> Path:
    with step("venv server,local: install the wheel"):
        venv = venv_with("server-local", wheel, "server,local")
    bin_ = venv / "bin"
    env = clean_env(data)
    with step("venv server,local: memstack models install minilm"):
        out = run([str(bin_ / "memstack"), "models", "install", "minilm"], env)
        assert "all-MiniLM-L6-v2" in out, out
    with step("venv server,local: ingest --sync + search"):
        conversation = ROOT / "examples" / "conversation.jsonl"
        out = run([str(bin_ / "memstack"), "ingest", str(conversation), "--user", "maya", "--sync"], env)
        print("   ", out.strip().splitlines()[-1])
        out = run(
            [str(bin_ / "memstack"), "search", "where does Maya live now", "--user", "maya", "--k", "3"], env
        )
        # Maya moved from Tokyo to Osaka (m020): the current city, not a city named anywhere
        assert "Osaka" in out, out
        print("   ", out.strip().splitlines()[0][:100])
    return venv


CLIENT_SCRIPT = """
import sys
from memstack.client import MemoryClient
assert not {"numpy", "boto3", "botocore", "typer"} & set(sys.modules), sorted(sys.modules)
with MemoryClient(sys.argv[1], api_key=sys.argv[2]) as client:
    turn = {"role": "user", "content": "My sister Ines keeps bees in Porto"}
    client.add([turn], user_id="ines-fan", sync=True)
    hits = client.search("who keeps bees", user_id="ines-fan", top_k=3).results
    assert any("bees" in hit.content for hit in hits), hits
    hits = client.search("where does Maya live now", user_id="maya", top_k=3).results
    assert hits, "the server venv's ingest is not visible"
print("client ok:", len(hits), "hits")
"""


def client_against(wheel: Path, base: str, data: Path) -> Path:
    with step("venv client: install the wheel"):
        venv = venv_with("client", wheel, "client")
    with step("venv client: add + search over HTTP"):
        script = [str(venv / "bin" / "python"), "-c", CLIENT_SCRIPT, base, API_KEY]
        print("   ", run(script, clean_env(data)).strip())
    out = run([str(venv / "bin" / "memstack"), "--version"], clean_env(data))
    assert out.strip() == f"memstack {__version__}", out
    done = subprocess.run(
        [str(venv / "bin" / "memstack"), "serve"], capture_output=True, text=True, env=clean_env(data)
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and "pip install 'memstack[server]'" in lines[0], (
        done.stderr
    )
    print("    memstack serve without the server extra:", lines[0])
    return venv


MCP_SCRIPT = """
import anyio, os, sys
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

async def main():
    params = StdioServerParameters(command=sys.argv[1], args=["mcp", "--user", "u"], env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        names = sorted(t.name for t in (await session.list_tools()).tools)
    assert "search_memory" in names or any("search" in n for n in names), names
    print("MCP tools:", ", ".join(names))

anyio.run(main)
"""


def integrations(wheel: Path, data: Path) -> Path:
    with step("venv integrations: install the wheel"):
        venv = venv_with("integrations", wheel, "integrations")
    with step("venv integrations: list the MCP tools over stdio"):
        env = clean_env(data, embedder="hashing")
        print(
            "   ",
            run(
                [str(venv / "bin" / "python"), "-c", MCP_SCRIPT, str(venv / "bin" / "memstack")], env
            ).strip(),
        )
    return venv


def mb(size: int) -> str:
    return f"{size / 1e6:.0f} MB"


def check() -> None:
    started = time.perf_counter()
    with step("build sdist + wheel"):
        wheel = build_dists()
    print(f"    {wheel.name}")
    with tempfile.TemporaryDirectory(prefix="memstack-install-") as tmp:
        data = Path(tmp) / "data"
        server = server_and_local(wheel, data)
        # `memstack serve` of the server venv on a free loopback port, the MiniLM store ingested above.
        serving = ServerProcess(
            data, embedder="minilm", tenant="local", python=str(server / "bin" / "python")
        )
        with serving:
            client = client_against(wheel, f"http://127.0.0.1:{serving.port}", Path(tmp) / "client-data")
        mcp = integrations(wheel, Path(tmp) / "mcp-data")
        models = sum(p.stat().st_size for p in (data / "models").rglob("*") if p.is_file())
    empty = empty_venv_size()
    print("installed size (site-packages less an empty venv's):")
    for name, venv in (("client", client), ("server,local", server), ("integrations", mcp)):
        print(f"    {name}: {mb(site_size(venv) - empty)}")
    print(f"    MiniLM model (memstack models install minilm): {mb(models)}")
    # CPU seconds move less with the machine's load than wall time: both, to compare runs.
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = children.ru_utime + children.ru_stime
    print(f"install check: {time.perf_counter() - started:.1f} s in all, {cpu:.1f} s of CPU in its commands")


def closure(extras: tuple[str, ...]) -> set[str]:
    """The distributions ``memstack[extras]`` installs besides memstack, from this (dev) venv's metadata."""
    from importlib.metadata import requires

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[tuple[str, str]] = set()
    todo = [("memstack", ""), *(("memstack", extra) for extra in extras)]
    while todo:
        name, extra = todo.pop()
        key = (canonicalize_name(name), extra)
        if key in seen:
            continue
        seen.add(key)
        for line in requires(name) or []:
            req = Requirement(line)
            marker = str(req.marker) if req.marker is not None else ""
            # An extra's own lines say `extra == "..."`; the others belong to the bare install.
            if ("extra" in marker) != bool(extra):
                continue
            if req.marker is None or req.marker.evaluate({"extra": extra}):
                todo.extend([(req.name, ""), *((req.name, e) for e in req.extras)])
    return {name for name, _ in seen} - {"memstack"}


def installed_size(names: set[str]) -> int:
    from importlib.metadata import distribution

    total = 0
    for name in names:
        dist = distribution(name)
        for file in dist.files or ():
            path = Path(str(dist.locate_file(file)))
            if "__pycache__" not in path.parts and path.is_file():
                total += path.stat().st_size
    return total


def sizes() -> None:
    """Each extra's installed size (its distributions' files, no bytecode): the README's table.

    Read from this venv (make install holds every extra at the locked versions), so it needs
    no install; ``make test-install`` measures three of them in clean venvs the same way.
    """
    import zipfile

    with zipfile.ZipFile(build_dists()) as wheel:
        own = sum(info.file_size for info in wheel.infolist())
    print("| extra | installed |\n| --- | --- |")
    for extra in ("", *EXTRAS, "dev"):
        names = closure((extra,) if extra else ())
        label = f"`memstack[{extra}]`" if extra else "`memstack`"
        size = own + installed_size(names)
        print(f"| {label} | {mb(size)} ({len(names) + 1} packages) |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", action="store_true", help="measure every extra's installed size instead")
    args = parser.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    sizes() if args.sizes else check()
    return 0


if __name__ == "__main__":
    sys.exit(main())
