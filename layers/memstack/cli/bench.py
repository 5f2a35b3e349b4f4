"""``memstack bench``: search, ingest, server, cold-start and soak figures, measured against a floor."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from memstack.cli.app import UserError, console, print_json

bench_app = typer.Typer(
    help="Benchmarks: latency and throughput on this machine, beside a floor measured in the same run.",
    no_args_is_help=True,
)
_err = Console(stderr=True)


def parse_counts(value: str, option: str, *, largest: int) -> list[int]:
    """ "1000,10000" -> [1000, 10000]; each a whole number from 1 to ``largest``."""
    try:
        counts = sorted({int(part.replace("_", "")) for part in value.split(",") if part.strip()})
    except ValueError:
        raise UserError(f"{option} must be comma-separated whole numbers, got {value!r}") from None
    if not counts or counts[0] < 1 or counts[-1] > largest:
        raise UserError(f"{option} needs values from 1 to {largest:,}")
    return counts


def _quiet() -> None:
    # One log line per search would bury the progress lines; the figures are in the report.
    logging.getLogger("memstack").setLevel(logging.WARNING)


def _load_line(machine: dict[str, Any]) -> str:
    load = " / ".join(str(x) for x in machine.get("load_average") or [])
    return f"{machine['cpus']} cores, load average {load} (1, 5, 15 min) while measuring"


@bench_app.command("search")
def search(
    memories: Annotated[str, typer.Option(help="memories per user, comma-separated")] = "1000,10000,100000",
    users: Annotated[int, typer.Option(min=1, max=1000, help="users in the store (user 0 is searched)")] = 1,
    embedder: Annotated[str, typer.Option(help="hashing | minilm | mpnet")] = "hashing",
    queries: Annotated[int, typer.Option(min=2, max=10_000, help="searches per size")] = 200,
    backend: Annotated[
        str,
        typer.Option(
            help="embedded | postgres (MEMSTACK_POSTGRES_DSN, else a private server from the dev wheel)"
        ),
    ] = "embedded",
    plot: Annotated[Path | None, typer.Option("--plot", help="draw the scale curve into this PNG")] = None,
    embedding_cache: Annotated[
        Path | None,
        typer.Option(
            "--embedding-cache",
            help="keep the turns' and queries' vectors here, reused next run (a query then costs a lookup)",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Search latency (p50/p95/p99, per stage) per store size, and its ratio to the floor."""
    from memstack.bench.search import run_search_bench

    if embedder not in ("hashing", "minilm", "mpnet"):
        raise UserError("--embedder must be hashing, minilm or mpnet")
    if backend not in ("embedded", "postgres"):
        raise UserError("--backend must be embedded or postgres")
    sizes = parse_counts(memories, "--memories", largest=10_000_000)
    _quiet()
    report = run_search_bench(
        sizes,
        users=users,
        embedder=embedder,
        queries=queries,
        progress=_err.print,
        backend=backend,
        embedding_cache=embedding_cache,
    )
    if plot is not None:
        from memstack.bench.plot import plot_search

        plot_search(report, plot)
    if as_json:
        print_json(report.as_dict())
        return
    table = Table(
        title=f"search, {backend} store, {embedder} embedder, {users} user(s), {queries} queries",
        title_justify="left",
    )
    for column in ("memories", "p50 ms", "p95 ms", "p99 ms", "floor p50", "ratio", "first ms", "RSS MB"):
        table.add_column(column, justify="right")
    on_server = any(p.server_floor_ms is not None for p in report.points)
    if on_server:
        # The store's own two statements in their least form, on its server (bench/server_floor.py).
        table.add_column("server floor p50", justify="right")
        table.add_column("ratio to it", justify="right")
    if users > 1:
        table.add_column("alone p50", justify="right")
        table.add_column("shared/alone", justify="right")
    for p in report.points:
        row = [
            f"{p.memories:,}",
            f"{p.latency_ms['p50']:.2f}",
            f"{p.latency_ms['p95']:.2f}",
            f"{p.latency_ms['p99']:.2f}",
            f"{p.floor_ms['p50']:.2f}",
            f"{p.ratio_p50:.2f}x",
            f"{p.first_search_ms:.0f}",
            f"{p.rss_mb:.0f}",
        ]
        if on_server:
            server = p.server_floor_ms["p50"] if p.server_floor_ms else float("nan")
            row += [f"{server:.2f}", f"{p.server_ratio_p50 or float('nan'):.2f}x"]
        if users > 1 and p.alone_latency_ms is not None:
            row += [f"{p.alone_latency_ms['p50']:.2f}", f"{p.shared_over_alone_p50:.2f}x"]
        table.add_row(*row)
    out = Console(width=max(console.width, 110))
    out.print(table)
    for p in report.points:
        stages = ", ".join(f"{s} {ms:.2f}" for s, ms in p.stages_p50_ms.items() if s != "total")
        recall = (
            f"; vector stage ({'exact' if p.vector_exact else 'two-stage'}) finds "
            f"{p.vector_recall_at_10_mean:.3f} of the exact full-dim top 10 (mean; median "
            f"{p.vector_recall_at_10:.2f})"
            if p.vector_recall_at_10 is not None and p.vector_recall_at_10_mean is not None
            else ""
        )
        out.print(
            f"{p.memories:,}: per-stage p50 ms: {stages}; a query matches {p.match_fraction_p50:.1%} "
            f"of the memories (median); filled at {p.fill_msg_per_s:,.0f} msg/s{recall}"
        )
    out.print(_load_line(report.machine))
    if plot is not None:
        out.print(f"plot: {plot}")


@bench_app.command("ingest")
def ingest(
    existing: Annotated[
        str, typer.Option(help="memories already in the store, comma-separated")
    ] = "1000,100000",
    messages: Annotated[int, typer.Option(min=1, max=100_000, help="messages per cell")] = 300,
    inline_messages: Annotated[
        int, typer.Option(min=1, max=10_000, help="messages per cell with inline extraction")
    ] = 60,
    embedder: Annotated[str, typer.Option(help="hashing | minilm")] = "hashing",
    paths: Annotated[str, typer.Option(help="service and/or http, comma-separated")] = "service,http",
    sessions: Annotated[
        bool,
        typer.Option(
            "--session",
            help="run each cell again with its adds in one session (each links to the session's last turns)",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Messages per second through the service and over HTTP, batch 1 and 50, extraction off/queued/inline."""
    from memstack.bench.ingest import PATHS, run_ingest_bench

    sizes = parse_counts(existing, "--existing", largest=10_000_000)
    chosen = [p.strip() for p in paths.split(",") if p.strip()]
    if not chosen or any(p not in PATHS for p in chosen):
        raise UserError(f"--paths takes {' and/or '.join(PATHS)}, got {paths!r}")
    _quiet()
    report = run_ingest_bench(
        sizes,
        messages=messages,
        inline_messages=inline_messages,
        embedder=embedder,
        paths=chosen,
        sessions=sessions,
        progress=_err.print,
    )
    if as_json:
        print_json(report.as_dict())
        return
    table = Table(title=f"ingest, {embedder} embedder", title_justify="left")
    columns = (
        "existing",
        "path",
        "batch",
        "extraction",
        "messages",
        "msg/s",
        "extraction jobs/s",
        "CPU ms/job",
        "session",
    )
    for column in columns:
        table.add_column(column, justify="right")
    for c in report.cells:
        jobs = f"{c.extraction_jobs_per_s:,.1f}" if c.extraction_jobs_per_s is not None else "-"
        cpu = f"{c.extraction_cpu_ms_per_job:.2f}" if c.extraction_cpu_ms_per_job is not None else "-"
        table.add_row(
            f"{c.existing:,}",
            c.path,
            str(c.batch),
            c.infer,
            str(c.messages),
            f"{c.msg_per_s:,.0f}",
            jobs,
            cpu,
            "yes" if c.session else "-",
        )
    out = Console(width=max(console.width, 110))
    out.print(table)
    out.print(_load_line(report.machine))


@bench_app.command("extraction")
def extraction(
    turns: Annotated[int, typer.Option(min=1, max=100_000, help="turns to ingest")] = 300,
    data: Annotated[
        Path | None,
        typer.Option(
            help="a LoCoMo JSON file: its first --turns turns (default: the synthetic conversation)"
        ),
    ] = None,
    embedder: Annotated[str, typer.Option(help="minilm | mpnet | hashing")] = "minilm",
    compare: Annotated[
        bool, typer.Option("--compare", help="ingest a second time with the embedding memo off")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Turns per second of ingest with extraction (sync), beside the embedder's own batch floor."""
    from memstack.bench.extraction import locomo_sessions, run_extraction_bench, synthetic_sessions

    _quiet()
    if data is not None:
        sessions, source = locomo_sessions(data, turns), data.name
    else:
        sessions, source = synthetic_sessions(turns), "synthetic"
    report = run_extraction_bench(
        sessions, source=source, embedder=embedder, compare=compare, progress=_err.print
    )
    if as_json:
        print_json(report.as_dict())
        return
    table = Table(
        title=f"ingest with extraction, {embedder} embedder, {report.turns:,} turns of {source} "
        f"in {report.sessions} sessions",
        title_justify="left",
    )
    for column in (
        "memo",
        "turns/s",
        "floor turns/s",
        "of floor",
        "turns/CPU s",
        "floor turns/CPU s",
        "texts embedded/turn",
        "embed calls",
        "time in model",
        "LTM",
    ):
        table.add_column(column, justify="right")
    for r in report.runs:
        table.add_row(
            "on" if r.memo else "off",
            f"{r.turns_per_s:,.2f}",
            f"{r.floor_turns_per_s:,.2f}",
            f"{r.of_floor:.0%}",
            f"{r.turns_per_cpu_s:,.2f}",
            f"{r.floor_turns_per_cpu_s:,.2f}",
            f"{r.texts_per_turn:.2f}",
            f"{r.embed_calls:,}",
            f"{r.embed_share:.0%}",
            f"{r.ltm_memories:,}",
        )
    out = Console(width=max(console.width, 110))
    out.print(table)
    out.print(
        f"floor: the model alone embeds each turn once, batches of {report.config['floor_batch']}, "
        f"before and after each run (median {report.floor_turns_per_s:,.2f} turns/s); "
        "turns/CPU s: turns per second of the process's CPU time, what one idle core would reach; "
        f"one-off loads (model, extractor word lists) {report.warmup_seconds:.1f} s before timing"
    )
    out.print(_load_line(report.machine))


@bench_app.command("server")
def server(
    clients: Annotated[str, typer.Option(help="concurrent clients, comma-separated")] = "1,8,32",
    seconds: Annotated[float, typer.Option(min=1, max=600, help="seconds of load per client count")] = 30,
    memories: Annotated[
        int, typer.Option(min=1, max=1_000_000, help="memories of the searched user")
    ] = 10_000,
    threads: Annotated[int, typer.Option(min=1, max=256, help="memstack serve --threads")] = 8,
    workers: Annotated[int, typer.Option(min=1, max=64, help="memstack serve --workers")] = 1,
    embedder: Annotated[str, typer.Option(help="hashing | minilm")] = "hashing",
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Searches per second through `memstack serve` (loopback only): req/s, p50/p95, errors."""
    from memstack.bench.server import run_server_bench

    counts = parse_counts(clients, "--clients", largest=256)
    _quiet()
    report = run_server_bench(
        memories=memories,
        clients=counts,
        seconds=seconds,
        threads=threads,
        workers=workers,
        embedder=embedder,
        progress=_err.print,
    )
    if as_json:
        print_json(report.as_dict())
        return
    title = f"memstack serve, {memories:,} memories, {workers} process(es) x {threads} threads"
    table = Table(title=title, title_justify="left")
    for column in ("clients", "seconds", "requests", "req/s", "p50 ms", "p95 ms", "errors"):
        table.add_column(column, justify="right")
    for p in report.points:
        table.add_row(
            str(p.clients),
            f"{p.seconds:.1f}",
            str(p.requests),
            f"{p.requests_per_s:,.1f}",
            f"{p.latency_ms['p50']:.1f}",
            f"{p.latency_ms['p95']:.1f}",
            str(p.errors),
        )
    out = Console(width=max(console.width, 110))
    out.print(table)
    for p in report.points:
        if p.error_samples:
            out.print(f"{p.clients} clients, errors: {'; '.join(p.error_samples)}")
    out.print(_load_line(report.machine))


@bench_app.command("soak")
def soak(
    clients: Annotated[int, typer.Option(min=1, max=256, help="concurrent clients")] = 8,
    seconds: Annotated[float, typer.Option(min=1, max=86_400, help="seconds of mixed traffic")] = 30,
    embedder: Annotated[str, typer.Option(help="hashing | minilm")] = "hashing",
    data_dir: Annotated[
        Path | None, typer.Option(help="where the server keeps its data (default: a fresh temporary dir)")
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the traffic mix")] = 12,
    min_operations: Annotated[
        int, typer.Option(min=0, help="operations per client at least, however long they take")
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """N clients of mixed traffic on loopback, then every store checked: ops, errors, p50/p95, invariants."""
    import tempfile

    from memstack.bench.soak import print_summary, run

    if embedder not in ("hashing", "minilm"):
        raise UserError("--embedder must be hashing or minilm")
    with tempfile.TemporaryDirectory(prefix="memstack-soak-") as tmp:
        result = run(clients, seconds, data_dir or Path(tmp), embedder, seed, min_operations)
    if as_json:
        print_json(result)
    else:
        print_summary(result)
    if not all(v["held"] for v in result["invariants"].values()):
        raise typer.Exit(1)


@bench_app.command("coldstart")
def coldstart(
    repeats: Annotated[int, typer.Option(min=1, max=50, help="fresh interpreters per handler and mode")] = 5,
    handler: Annotated[
        list[str] | None,
        typer.Option("--handler", help="only this handler (a lambdas/ directory); repeatable"),
    ] = None,
    source: Annotated[
        bool, typer.Option("--source", help="also import without bytecode (slow: compiles every module)")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Each Lambda handler's import time in a fresh interpreter, beside the floor, and the layer's size."""
    from memstack.bench.coldstart import FLOOR_MODULES, run_coldstart_bench

    try:
        report = run_coldstart_bench(repeats, only=handler or (), source=source, progress=_err.print)
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    if as_json:
        print_json(report.as_dict())
        return
    table = Table(
        title=f"Lambda handler import, median of {repeats} fresh interpreters", title_justify="left"
    )
    for column in ("handler", "compiled ms", "CPU ms", "compiled / floor", *(("source ms",) * source)):
        table.add_column(column, justify="right")
    for h in report.handlers:
        row = [
            h.function,
            f"{h.compiled_ms['median']:.0f}",
            f"{h.compiled_cpu_ms['median']:.0f}",
            f"{h.compiled_over_floor:.2f}x",
        ]
        if h.source_ms is not None:
            row.append(f"{h.source_ms['median']:.0f}")
        table.add_row(*row)
    out = Console(width=max(console.width, 110))
    out.print(table)
    out.print(
        f"floor: a fresh interpreter importing {', '.join(FLOOR_MODULES)}: "
        f"{report.floor_ms['median']:.0f} ms, {report.floor_cpu_ms['median']:.0f} ms CPU "
        f"(median of {len(report.handlers) * repeats})"
    )
    layer = report.layer
    if layer.get("built"):
        out.print(
            f"layer: {layer['zipped_mb']} MB zipped, {layer['unzipped_mb']} MB unzipped, "
            f"{layer['pyc_files']} .pyc for {layer['py_files']} .py"
        )
    else:
        out.print(f"layer: not built ({layer['hint']})")
    out.print(_load_line(report.machine))


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")
