"""``memstack eval locomo PATH``: recall@k of the retrieval pipeline on LoCoMo-format data."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from memstack.cli.app import UserError, console, print_json, settings_from_cli
from memstack.evaluation.embedding_cache import CachedEmbedder
from memstack.evaluation.extraction import ExtractionReport, evaluate_extraction
from memstack.evaluation.locomo import LocomoFormatError, load_locomo
from memstack.evaluation.plot import plot_recall
from memstack.evaluation.recall import METRICS
from memstack.evaluation.runner import CATEGORY_ORDER, EvalReport, evaluate
from memstack.evaluation.scenarios import ScenarioFormatError, load_scenarios
from memstack.factory import build_embedder

eval_app = typer.Typer(
    help="Measure retrieval and extraction quality on benchmark data.", no_args_is_help=True
)


def parse_ks(value: str) -> list[int]:
    try:
        ks = sorted({int(part) for part in value.split(",") if part.strip()})
    except ValueError:
        raise UserError(f"--k must be comma-separated whole numbers, got {value!r}") from None
    if not ks or ks[0] < 1:
        raise UserError("--k needs at least one value, each 1 or more")
    return ks


def progress_bar(*, transient: bool) -> Progress:
    """A bar on stderr (stdout keeps the report): description, bar, n of m, elapsed time."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=transient,
    )


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def render_table(report: EvalReport, wall: float) -> Table:
    table = Table(title=f"LoCoMo recall@k ({report.questions} questions, {wall:.0f} s)", title_justify="left")
    table.add_column("retriever")
    table.add_column("k", justify="right")
    for name in ["all", *CATEGORY_ORDER]:
        table.add_column(f"{name}\n(n={report.counts.get(name, 0)})", justify="right")
    rows = [("memstack", report.recall), *((f"{n}-only", r) for n, r in report.baselines.items())]
    for k in report.recall:
        for label, recall in rows:
            table.add_row(label, k, *(_fmt(recall[k].get(c)) for c in ["all", *CATEGORY_ORDER]))
        table.add_section()
    return table


_METRIC_LABELS = {
    "turn_recall": "turn recall",
    "any": "any evidence",
    "all": "all evidence",
    "ndcg": "NDCG",
    "session_recall": "session recall",
    "cited": "turns cited",
}


def render_metrics(report: EvalReport) -> Table:
    """Every metric, all questions together, per retriever and k."""
    table = Table(title="every metric (all questions)", title_justify="left")
    table.add_column("retriever")
    table.add_column("k", justify="right")
    for metric in METRICS:
        table.add_column(_METRIC_LABELS[metric], justify="right")
    for k in report.recall:
        for name, metrics in report.metrics.items():
            label = name if name == "memstack" else f"{name}-only"
            cells = []
            for metric in METRICS:
                value = metrics[metric][k].get("all")
                shown = "-" if value is None else f"{value:.1f}" if metric == "cited" else f"{value:.3f}"
                cells.append(shown)
            table.add_row(label, k, *cells)
        table.add_section()
    return table


@eval_app.command("locomo")
def locomo(
    path: Annotated[Path, typer.Argument(help="a LoCoMo JSON file (a list of conversations)")],
    k: Annotated[str, typer.Option("--k", help="cut-offs, comma-separated")] = "5,10,25",
    baselines: Annotated[bool, typer.Option(help="also measure BM25-only and vector-only")] = False,
    raw: Annotated[
        bool, typer.Option("--raw", help="store the raw turns only (no extraction): the turns-only baseline")
    ] = False,
    consolidate: Annotated[
        bool, typer.Option("--consolidate", help="consolidate after each session, as the scheduler would")
    ] = False,
    limit: Annotated[int | None, typer.Option(help="only the first N conversations")] = None,
    embedder: Annotated[str | None, typer.Option(help="override MEMSTACK_EMBEDDER")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="print every figure as JSON (with each question's evidence ranks)")
    ] = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="write a PNG: turn recall@k by category, with the baselines")
    ] = None,
    cache_dir: Annotated[
        Path | None, typer.Option("--cache-dir", help="keep embeddings on disk here and reuse them next run")
    ] = None,
    store_dir: Annotated[
        Path | None,
        typer.Option("--store-dir", help="keep each conversation's store here, reused when ingest matches"),
    ] = None,
) -> None:
    """Ingest each conversation as the product does and report retrieval metrics per question category."""

    ks = parse_ks(k)
    settings = settings_from_cli(embedder=embedder)
    if plot is not None and plot.suffix.lower() != ".png":
        raise UserError(f"--plot writes a PNG: give a file name ending in .png, not {plot.name!r}")
    if max(ks) > settings.api.max_top_k:
        raise UserError(f"--k values must be at most {settings.api.max_top_k} (MEMSTACK_MAX_TOP_K)")
    try:
        conversations = load_locomo(path)
    except LocomoFormatError as exc:
        raise UserError(str(exc)) from None
    if limit is not None:
        conversations = conversations[: max(limit, 1)]
    turns = sum(len(c.turns) for c in conversations)
    questions = sum(len(c.questions) for c in conversations)
    # One log line per search would bury the progress bar; the figures are in the report.
    logging.getLogger("memstack").setLevel(logging.WARNING)
    started = time.perf_counter()
    with progress_bar(transient=as_json) as bar:
        ingest_task = bar.add_task("ingest turns", total=turns)
        search_task = bar.add_task("search questions", total=questions)
        tasks = {"ingest": ingest_task, "search": search_task}
        model = build_embedder(settings)
        cached = CachedEmbedder(model, cache_dir) if cache_dir is not None else None
        try:
            report = evaluate(
                conversations,
                settings,
                ks,
                baselines=baselines,
                infer=not raw,
                consolidate=consolidate,
                embedder=cached or model,
                store_dir=store_dir,
                progress=lambda stage, n: bar.advance(tasks[stage], n),
            )
        finally:
            if cached is not None:
                cached.close()
    wall = time.perf_counter() - started
    report.seconds["wall"] = round(wall, 2)
    if plot is not None:
        plot_recall(report.as_dict(), plot, CATEGORY_ORDER)
    if as_json:
        print_json(report.as_dict())
        return
    # Wide enough for every column header even when stdout is not a terminal.
    out = Console(width=max(console.width, 120))
    out.print(render_table(report, wall))
    out.print(render_metrics(report))
    mode = "raw turns only (--raw)" if raw else "extraction on"
    if consolidate:
        mode += ", consolidation after each session"
    out.print(f"ingest: {mode}; stored {report.stored}")
    if plot is not None:
        out.print(f"plot written to {plot}")
    if report.stage_ms_median:
        out.print(
            "median ms per search: "
            + ", ".join(f"{stage} {ms:.1f}" for stage, ms in report.stage_ms_median.items())
            + f"; p95 total {report.search_ms_p95:.1f}"
        )
    if report.unusable_questions or report.dropped_evidence:
        out.print(
            f"skipped {report.unusable_questions} questions without usable evidence; "
            f"ignored {report.dropped_evidence} evidence ids that name no turn"
        )


def render_extraction(report: ExtractionReport, show_failures: bool) -> list[Any]:
    title = (
        f"extraction scenarios, --llm {report.llm}: {report.passed}/{report.scenarios} passed "
        f"({report.pass_rate:.1%}), {report.seconds:.0f} s"
    )
    table = Table(title=title, title_justify="left")
    for column in ("group", "n", "passed", "rate"):
        table.add_column(column, justify="left" if column == "group" else "right")
    table.add_row("all", str(report.scenarios), str(report.passed), f"{report.pass_rate:.1%}")
    for label, rows in (("tag", report.by_tag), ("file", report.by_file)):
        table.add_section()
        for name, row in rows.items():
            table.add_row(f"{label} {name}", str(row["n"]), str(row["passed"]), f"{row['rate']:.1%}")
    out: list[Any] = [
        table,
        f"LTM records written per message {report.ltm_per_message:.2f}; "
        f"LLM calls per message {report.llm_calls_per_message:.2f}; "
        f"{report.messages} messages; failed jobs {report.failed_jobs}",
    ]
    if show_failures:
        for result in report.failures:
            failed = [c for c in result.checks if not c.passed]
            out.append(
                f"FAIL {result.id} ({result.source}): "
                + "; ".join(f"{c.kind} {c.expected}: {c.detail}" for c in failed)
                + (f"; {result.failed_jobs} failed jobs" if result.failed_jobs else "")
            )
    return out


@eval_app.command("extraction")
def extraction(
    paths: Annotated[list[Path], typer.Argument(help="scenario files (JSON lines)")],
    llm: Annotated[str | None, typer.Option(help="local | bedrock | openai (overrides MEMSTACK_LLM)")] = None,
    embedder: Annotated[str | None, typer.Option(help="override MEMSTACK_EMBEDDER")] = None,
    failures: Annotated[bool, typer.Option(help="list each failed scenario and why")] = True,
    limit: Annotated[int | None, typer.Option(help="only the first N scenarios (a slow model)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Run each scenario in a fresh store through the ingest path and check what memstack ends up knowing."""
    settings = settings_from_cli(llm=llm, embedder=embedder)
    try:
        scenarios = load_scenarios(paths)
    except ScenarioFormatError as exc:
        raise UserError(str(exc)) from None
    if limit is not None:
        scenarios = scenarios[: max(limit, 1)]
    logging.getLogger("memstack").setLevel(logging.ERROR)
    with progress_bar(transient=True) as bar:
        task = bar.add_task("scenarios", total=len(scenarios))
        report = evaluate_extraction(scenarios, settings, progress=lambda n: bar.advance(task, n))
    if as_json:
        print_json(report.as_dict())
        return
    out = Console(width=max(console.width, 120))
    for part in render_extraction(report, failures):
        out.print(part, highlight=False, markup=False) if isinstance(part, str) else out.print(part)


def register(app: typer.Typer) -> None:
    app.add_typer(eval_app, name="eval")
