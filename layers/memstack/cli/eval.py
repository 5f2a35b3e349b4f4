"""``memstack eval locomo|beam PATH``: retrieval metrics on two benchmarks; ``eval extraction``."""

# No ``from __future__ import annotations``: typer reads the option annotations of the
# commands `_benchmark_command` defines, which name its arguments (evaluated at definition).

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from memstack.cli.app import UserError, console, print_json, settings_from_cli
from memstack.evaluation import beam as beam_format
from memstack.evaluation.embedding_cache import CachedEmbedder
from memstack.evaluation.extraction import ExtractionReport, evaluate_extraction
from memstack.evaluation.locomo import Conversation, LocomoFormatError, load_locomo
from memstack.evaluation.plot import plot_recall
from memstack.evaluation.recall import METRICS
from memstack.evaluation.runner import CATEGORY_ORDER, EvalReport, evaluate
from memstack.evaluation.scenarios import ScenarioFormatError, load_scenarios
from memstack.evaluation.small import SmallFormatError, SmallReport, evaluate_small, load_small
from memstack.factory import build_embedder
from memstack.settings import Settings

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


def _label(name: str) -> str:
    """memstack; its own stages alone ``bm25-only``, ``vector-only``; the plain baselines as named."""
    return name if name == "memstack" or name.endswith("-turns") else f"{name}-only"


def render_table(report: EvalReport, wall: float, benchmark: str, categories: list[str]) -> Table:
    title = f"{benchmark} turn recall@k ({report.questions} questions, {wall:.0f} s)"
    table = Table(title=title, title_justify="left")
    table.add_column("retriever")
    table.add_column("k", justify="right")
    shown = [c for c in ["all", *categories] if report.counts.get(c)]
    for name in shown:
        table.add_column(f"{name}\n(n={report.counts.get(name, 0)})", justify="right")
    rows = [("memstack", report.recall), *((_label(n), r) for n, r in report.baselines.items())]
    for k in report.recall:
        for label, recall in rows:
            table.add_row(label, k, *(_fmt(recall[k].get(c)) for c in shown))
        table.add_section()
    return table


def render_questions(report: EvalReport) -> Table | None:
    """Abstention, knowledge-update ordering and the head-to-head counts, per retriever (when measured)."""
    if not (report.abstention or report.knowledge_update):
        return None
    table = Table(title="whole-question figures", title_justify="left")
    for column in (
        "retriever",
        "abstention AUROC\n(top score)",
        "top score median\nanswerable / not",
        "update in top 5",
        "update above\noriginal",
        "memstack @10\nbetter / worse",
    ):
        table.add_column(column, justify="left" if column == "retriever" else "right")
    k = "10" if "10" in report.recall else list(report.recall)[-1]
    for name in report.metrics:
        a = report.abstention.get(name, {})
        u = report.knowledge_update.get(name, {})
        v = report.versus.get(name, {}).get(k)
        table.add_row(
            _label(name),
            _fmt(a.get("auroc")),
            f"{_fmt(a.get('answerable_median'))} / {_fmt(a.get('unanswerable_median'))}" if a else "-",
            _fmt(u.get("updated_in_top5")),
            _fmt(u.get("updated_first")),
            f"{v['better']} / {v['worse']}" if v else "-",
        )
    answerable = report.evidence.get("answerable", {})
    if answerable.get("no"):
        # The per-search probability beside the scores, in the top score's columns.
        table.add_row(
            "memstack evidence\n(per search)",
            _fmt(answerable.get("evidence")),
            f"{_fmt(answerable.get('evidence_median_yes'))} / {_fmt(answerable.get('evidence_median_no'))}",
            "-",
            "-",
            "-",
        )
    return table


_METRIC_LABELS = {
    "turn_recall": "turn recall",
    "any": "any evidence",
    "all": "all evidence",
    "ndcg": "NDCG",
    "session_recall": "session recall",
    "cited": "turns cited",
    "no_new": "slots without\na new turn",
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
            label = _label(name)
            cells = []
            for metric in METRICS:
                value = metrics[metric][k].get("all")
                wide = metric in ("cited", "no_new")
                shown = "-" if value is None else f"{value:.2f}" if wide else f"{value:.3f}"
                cells.append(shown)
            table.add_row(label, k, *cells)
        table.add_section()
    return table


def _run_benchmark(
    benchmark: str,
    conversations: list[Conversation],
    categories: list[str],
    settings: Settings,
    ks: list[int],
    *,
    baselines: bool,
    raw: bool,
    consolidate: bool,
    per_turn: bool,
    as_json: bool,
    plot: Path | None,
    cache_dir: Path | None,
    store_dir: Path | None,
) -> None:
    """Evaluate, then print the tables (or the JSON) and write the plot: the same for every benchmark."""
    turns = sum(1 for c in conversations for t in c.turns if t.content.strip())
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
                per_turn=per_turn,
                embedder=cached or model,
                store_dir=store_dir,
                progress=lambda stage, n: bar.advance(tasks[stage], n),
                categories=categories,
            )
        finally:
            if cached is not None:
                cached.close()
    wall = time.perf_counter() - started
    report.seconds["wall"] = round(wall, 2)
    if plot is not None:
        plot_recall(report.as_dict(), plot, categories, benchmark)
    if as_json:
        print_json(report.as_dict())
        return
    # Wide enough for every column header even when stdout is not a terminal.
    out = Console(width=max(console.width, 120 if len(categories) < 6 else 200))
    out.print(render_table(report, wall, benchmark, categories))
    out.print(render_metrics(report))
    whole = render_questions(report)
    if whole is not None:
        out.print(whole)
    found = report.evidence.get("found_in_10", {})
    if found.get("yes") and found.get("no"):
        asked = int(found["yes"] or 0) + int(found["no"] or 0)
        out.print(
            f"evidence in the first 10 turns cited ({found['yes']} of {asked}): AUROC of the search's "
            f"evidence {_fmt(found.get('evidence'))}, of its top score {_fmt(found.get('top_score'))}"
        )
    mode = "raw turns only (--raw)" if raw else "extraction on"
    mode += ", one add per turn" if per_turn else ", one add per session"
    if consolidate:
        mode += ", consolidation after each session"
    out.print(f"{len(conversations)} conversations, {turns} turns; ingest: {mode}; stored {report.stored}")
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


def _load_first(
    load: Callable[[Any], list[Any]], errors: type[Exception], source: Any, limit: int | None
) -> list[Any]:
    """The first ``limit`` items ``load`` reads from ``source``; format errors become user errors."""
    try:
        items = load(source)
    except errors as exc:
        raise UserError(str(exc)) from None
    return items if limit is None else items[: max(limit, 1)]


def _benchmark_command(
    benchmark: str,
    load: Callable[[Path], list[Conversation]],
    errors: type[Exception],
    categories: list[str],
    *,
    path_help: str,
    command_help: str,
    baselines_default: bool,
    cache_by_default: bool,
) -> None:
    """Registers ``memstack eval <benchmark>``: the same options and run for every benchmark."""

    def command(
        path: Annotated[Path, typer.Argument(help=path_help)],
        k: Annotated[str, typer.Option("--k", help="cut-offs, comma-separated")] = "5,10,25",
        baselines: Annotated[
            bool,
            typer.Option(
                help="also measure BM25-only, vector-only and plain BM25 / dense over the raw turns"
            ),
        ] = baselines_default,
        raw: Annotated[
            bool,
            typer.Option("--raw", help="store the raw turns only (no extraction): the turns-only baseline"),
        ] = False,
        consolidate: Annotated[
            bool, typer.Option("--consolidate", help="consolidate after each session, as the scheduler would")
        ] = False,
        per_turn: Annotated[
            bool,
            typer.Option(
                "--add-per-turn",
                help="send each turn in its own add (as an agent does), not each session in one",
            ),
        ] = False,
        limit: Annotated[
            int | None, typer.Option("--conversations", "--limit", help="only the first N conversations")
        ] = None,
        embedder: Annotated[str | None, typer.Option(help="override MEMSTACK_EMBEDDER")] = None,
        as_json: Annotated[
            bool,
            typer.Option("--json", help="print every figure as JSON (with each question's evidence ranks)"),
        ] = False,
        plot: Annotated[
            Path | None,
            typer.Option("--plot", help="write a PNG: turn recall@k by category, with the baselines"),
        ] = None,
        cache_dir: Annotated[
            Path | None,
            typer.Option(
                "--cache-dir",
                help="keep embeddings here (by model and text) and reuse them next run"
                + (" (default: <MEMSTACK_DATA_DIR>/eval-cache)" if cache_by_default else ""),
            ),
        ] = None,
        no_cache: Annotated[bool, typer.Option("--no-cache", help="keep no embeddings on disk")] = False,
        store_dir: Annotated[
            Path | None,
            typer.Option(
                "--store-dir",
                help="keep each conversation's store here, reused when its ingest settings and code match",
            ),
        ] = None,
    ) -> None:
        ks = parse_ks(k)
        settings = settings_from_cli(embedder=embedder)
        if plot is not None and plot.suffix.lower() != ".png":
            raise UserError(f"--plot writes a PNG: give a file name ending in .png, not {plot.name!r}")
        if max(ks) > settings.api.max_top_k:
            raise UserError(f"--k values must be at most {settings.api.max_top_k} (MEMSTACK_MAX_TOP_K)")
        conversations = _load_first(load, errors, path, limit)
        # Long chats take long to embed on a laptop: there the vectors are kept for the next run.
        default_cache = settings.data_dir / "eval-cache" if cache_by_default else None
        _run_benchmark(
            benchmark,
            conversations,
            categories,
            settings,
            ks,
            baselines=baselines,
            raw=raw,
            consolidate=consolidate,
            per_turn=per_turn,
            as_json=as_json,
            plot=plot,
            cache_dir=None if no_cache else cache_dir or default_cache,
            store_dir=store_dir,
        )

    eval_app.command(benchmark.lower(), help=command_help)(command)


_benchmark_command(
    "LoCoMo",
    load_locomo,
    LocomoFormatError,
    CATEGORY_ORDER,
    path_help="a LoCoMo JSON file (a list of conversations)",
    command_help="Ingest each conversation as the product does and report retrieval metrics per question "
    "category (short two-person chats).",
    baselines_default=False,
    cache_by_default=False,
)
_benchmark_command(
    "BEAM",
    beam_format.load_beam,
    beam_format.BeamFormatError,
    list(beam_format.CATEGORIES),
    path_help="a BEAM file (.json.gz or .json: the development copy's format)",
    command_help="The same on BEAM (long user-assistant chats): recall per category, abstention AUROC, "
    "knowledge-update ordering, slots without new evidence, with the baselines of the same run.",
    baselines_default=True,
    cache_by_default=True,
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
    scenarios = _load_first(load_scenarios, ScenarioFormatError, paths, limit)
    logging.getLogger("memstack").setLevel(logging.ERROR)
    with progress_bar(transient=True) as bar:
        task = bar.add_task("scenarios", total=len(scenarios))
        report = evaluate_extraction(scenarios, settings, progress=lambda n: bar.advance(task, n))
    if as_json:
        print_json(report.as_dict())
        return
    _print_parts(render_extraction(report, failures))


def render_small(report: SmallReport, show_misses: bool) -> list[Any]:
    table = Table(
        title=f"small stores: {report.scenarios} users, {report.records} records, "
        f"{report.questions} questions"
    )
    table.add_column("answer")
    for name in ("n", "hit@1", "hit@3", "mrr@10"):
        table.add_column(name, justify="right")
    rows: dict[str, Mapping[str, float | None]] = {"all": report.metrics, **report.by_kind}
    for label, rates in rows.items():
        table.add_row(
            label,
            *(
                str(int(rates["n"] or 0)) if k == "n" else _fmt(rates.get(k))
                for k in ("n", "hit@1", "hit@3", "mrr@10")
            ),
        )
    m = report.metrics
    out: list[Any] = [
        table,
        f"score separation: hit AUROC {_fmt(m['hit_auroc'])}, "
        f"abstention AUROC {_fmt(m['abstention_auroc'])}, Brier {_fmt(m['brier'])}; "
        f"median top score right {_fmt(m['top_score_right_median'])}, "
        f"wrong {_fmt(m['top_score_wrong_median'])}, "
        f"unanswerable {_fmt(m['top_score_unanswerable_median'])}; "
        f"median score of a right hit {_fmt(m['right_hit_score_median'])}",
    ]
    if show_misses:
        for r in report.misses:
            top = r.hits[0] if r.hits else ("", 0.0, False)
            right = next((h for h in r.hits if h[2]), None)
            out.append(
                f"MISS {r.scenario}: {r.query!r} rank {r.rank}: top {top[0]!r} {top[1]:.3f}"
                + (f"; right {right[0]!r} {right[1]:.3f}" if right else "")
            )
    return out


@eval_app.command("small")
def small(
    path: Annotated[
        Path, typer.Argument(help="small-store scenarios (JSON lines, examples/retrieval/small.jsonl)")
    ],
    embedder: Annotated[str | None, typer.Option(help="override MEMSTACK_EMBEDDER")] = None,
    misses: Annotated[bool, typer.Option(help="list each question whose answer is not first")] = True,
    cache_dir: Annotated[
        Path | None, typer.Option("--cache-dir", help="keep embeddings here (by model and text)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Each scenario in a fresh store: turns added with extraction, memories written by key, then its
    questions; hit@1, MRR and how well the scores separate right from wrong."""
    settings = settings_from_cli(embedder=embedder)
    scenarios = _load_first(load_small, SmallFormatError, path, None)
    logging.getLogger("memstack").setLevel(logging.ERROR)
    model = build_embedder(settings)
    cached = CachedEmbedder(model, cache_dir) if cache_dir is not None else None
    try:
        with progress_bar(transient=True) as bar:
            task = bar.add_task("scenarios", total=len(scenarios))
            report = evaluate_small(
                scenarios, settings, cached or model, progress=lambda n: bar.advance(task, n)
            )
    finally:
        if cached is not None:
            cached.close()
    if as_json:
        print_json(report.as_dict())
        return
    _print_parts(render_small(report, misses))


def register(app: typer.Typer) -> None:
    app.add_typer(eval_app, name="eval")


def _print_parts(parts: Iterable[Any]) -> None:
    """A report's rendered parts, wide enough for its tables; plain text is printed as it is."""
    out = Console(width=max(console.width, 120))
    for part in parts:
        out.print(part, highlight=False, markup=False) if isinstance(part, str) else out.print(part)
