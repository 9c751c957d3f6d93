"""``proofrl eval search``: the problems, the rows and the report, from the command line's settings.

A problem set in file order (``coq-stdlib-files:N``) goes to :func:`proofrl.eval.library.run_file_rows`, any
other to :func:`proofrl.eval.provers.run_rows`; both write the report of :func:`~proofrl.eval.provers.write_report`.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..policy.sources import AUTOMATION
from .library import (
    FILE_ROWS,
    file_problems,
    files_spec,
    is_files_spec,
    library_model,
    library_transitions,
    run_file_rows,
)
from .provers import (
    ALL_ROWS,
    CONTEXT_ROWS,
    ENGINES,
    HAMMER_ROWS,
    MEMORY_ROWS,
    RowsConfig,
    check_settings,
    console_table,
    hammer_installed,
    loadavg,
    parse_list,
    run_rows,
    select_problems,
    write_report,
)


def default_policy(root: Path) -> str:
    """The tiny tactic model of the shared tactic assets under ``root`` (built there once)."""
    from ..data.assets import tactic_assets

    return tactic_assets(root).policy_spec


def default_rows(files: bool) -> tuple[str, ...]:
    """Every row (in file order, those of :data:`~proofrl.eval.library.FILE_ROWS`), (b) and (j) only where
    CoqHammer is installed."""
    return tuple(r for r in (FILE_ROWS if files else ALL_ROWS) if r not in HAMMER_ROWS or hammer_installed())


def cli_eval_search(
    problems: str,
    *,
    rows: str | None = None,
    seconds: float = 10.0,
    policy: str | None = None,
    workers: int = 2,
    limit: int | None = None,
    split: str | None = None,
    seed: int = 0,
    tactics: str = ",".join(AUTOMATION),
    engines: str = "best-first,mcts",
    memory_engine: str = "best-first",
    width: int = 4,
    atp_seconds: int = 5,
    node_hammer: str = "sauto",
    node_hammer_seconds: float | None = 1.0,
    context_model: Path | None = None,
    assets: Path = Path("runs"),
    out: Path = Path("runs/eval-search"),
    progress: bool = True,
    command: str = "",
) -> dict[str, Any]:
    """``proofrl eval search``: the rows on a problem set; console table, ``report.md``, ``summary.json``,
    ``results.jsonl`` under ``out``; ``command`` is how the report says it was run. Returns the summary.

    With no ``rows`` every row runs (those of :data:`~proofrl.eval.library.FILE_ROWS` in file order), row (b) left
    out, with a line saying so, where CoqHammer is not installed; the default models and the memory's transitions
    are built once under ``assets``."""
    from rich.console import Console

    from ..preflight import require_backend

    console = Console()
    files = is_files_spec(problems)
    if rows is None and "b" not in default_rows(files):
        console.print(
            "[yellow]rows b and j left out: CoqHammer is not installed (PROOFRL_COQ_LIBS=1 bash scripts/setup.sh)[/]"
        )
    settings = RowsConfig(
        rows=parse_list(rows or ",".join(default_rows(files)), ALL_ROWS, "row(s) in --rows"),
        seconds=seconds,
        workers=workers,
        tactics=parse_list(tactics, AUTOMATION, "tactic(s) in --tactics"),
        engines=parse_list(engines, tuple(ENGINES), "engine(s) in --engines"),
        memory_engine=memory_engine,
        width=width,
        atp_seconds=atp_seconds,
        node_hammer=node_hammer,
        node_hammer_seconds=node_hammer_seconds,
        policy=policy or "",
        context_model=str(context_model or ""),
    )
    check_settings(settings)
    if files and (bad := sorted(set(settings.rows) - set(FILE_ROWS))):
        raise ConfigError(
            f"rows {','.join(bad)} do not run in file order (their headers load the automation's libraries, "
            f"which may come after the file); choose among {','.join(FILE_ROWS)}"
        )
    modelled = [r for r in CONTEXT_ROWS if r in settings.rows]
    if files and modelled and files_spec(problems)[1] != "held-out":
        rows = ",".join(modelled)
        raise ConfigError(
            f"row {rows}'s tactic model was taught on the training side's files: run it on "
            f"{problems.split(':')[0]}:N (the held-out side), or leave {rows} out of --rows"
        )
    require_backend("coq")
    if files:
        probs, label = file_problems(problems, seed=seed)
    else:
        probs, label = select_problems(problems, split=split, limit=limit, seed=seed)
    if set(settings.rows) & {"c", "d"} and not settings.policy:
        settings.policy = default_policy(assets)
    memory_rows = bool(set(settings.rows) & set(MEMORY_ROWS))
    lemmas, by_module = None, True
    if memory_rows and problems.startswith("coq-lib:"):  # the corpus's own training side, as its split keeps it
        from ..data.corpus import corpus_training_side

        try:
            transitions, lemmas = corpus_training_side(problems)
        except FileNotFoundError as e:
            raise ConfigError(str(e)) from None
        by_module = False
    else:
        transitions = library_transitions(assets, progress=progress) if memory_rows else []
    if modelled and not settings.context_model:
        settings.context_model = str(library_model(assets, console=console if progress else None))
    command = command or shlex.join(["proofrl", "eval", "search", problems])
    load0 = loadavg()
    console.print(
        f"{len(probs)} theorems of {label}, {seconds:g} s each, {workers} workers, rows {','.join(settings.rows)}; "
        f"load average {load0}"
    )
    if files:
        ran = run_file_rows(probs, settings, out, transitions, progress=progress, say=console.print)
    else:
        ran = run_rows(
            probs,
            settings,
            out,
            progress=progress,
            say=console.print,
            transitions=transitions,
            lemmas=lemmas,
            split_by_module=by_module,
        )
    summary = write_report(
        out, ran, label=label, settings=settings, command=command, load={"before": load0, "after": loadavg()}
    )
    console.print(console_table(ran))
    console.print(f"report: {out / 'report.md'}")
    return summary
