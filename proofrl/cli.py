"""The ``proofrl`` command line. Each command is a thin shell over a library function."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)


@app.callback()
def main() -> None:
    """proofrl: train and evaluate LLM theorem provers, judged by a real proof assistant."""

# Commands are registered below, one block each; implementations live in their packages.
# -- commands --


@app.command()
def serve(
    backend: str = typer.Option(None, help="coq or lean (default coq, or the config's first backend)"),
    host: str = typer.Option(None, help="address to bind (default 127.0.0.1)"),
    port: int = typer.Option(None, help="port (default 8000)"),
    workers: int = typer.Option(None, help="prover processes per backend"),
    timeout: float = typer.Option(None, help="default seconds per item"),
    api_key: str = typer.Option(None, envvar="PROOFRL_API_KEY", help="require Authorization: Bearer KEY"),
    config: Path = typer.Option(None, exists=True, dir_okay=False, help="YAML file (see docs/server.md)"),
    sandbox: str = typer.Option(None, envvar="PROOFRL_SANDBOX", help="auto, bwrap, unshare or off (default auto)"),
) -> None:
    """Serve kimina-lean-server's HTTP API (/api/check, /verify) over proofrl's prover pools."""
    import logging

    import uvicorn

    from .errors import ConfigError
    from .provers import sandbox as sandboxing
    from .provers.factory import make_pool
    from .server import create_app
    from .server.config import load_serve_config

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        cfg = load_serve_config(config, backend=backend, host=host, port=port, workers=workers, timeout=timeout,
                                api_key=api_key, sandbox=sandbox)  # fmt: skip
        sb = sandboxing.configure(cfg.sandbox)  # before any prover starts; off is logged as a warning
    except ConfigError as e:
        raise typer.BadParameter(str(e)) from e
    typer.echo(f"proofrl serve: prover sandbox {sb.mode} ({sb.reason})", err=True)
    pools = {b: make_pool(b, pool=cfg.pool, **(cfg.prover if b == cfg.backends[0] else {})) for b in cfg.backends}
    try:
        uvicorn.run(create_app(pools, cfg.server), host=cfg.host, port=cfg.port, log_level="warning", timeout_graceful_shutdown=10)
    finally:
        for pool in pools.values():
            pool.close()


@app.command()
def doctor() -> None:
    """Report which proof-assistant backends are usable here, and why not."""
    import shutil
    import subprocess

    from rich.console import Console
    from rich.table import Table

    from .provers.lean.config import diagnose as lean_diagnose

    def coq() -> tuple[bool, str]:
        idetop, coqc = shutil.which("coqidetop.opt") or shutil.which("coqidetop"), shutil.which("coqc")
        if not (idetop and coqc):
            return False, f"not on PATH: {', '.join(n for n, p in (('coqidetop.opt', idetop), ('coqc', coqc)) if not p)}"
        try:
            out = subprocess.run([coqc, "--version"], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError) as e:
            return False, f"coqc --version failed: {e}"
        return True, f"{out.strip().splitlines()[0] if out.strip() else 'coqc'} ({idetop})"

    table = Table("backend", "usable", "why")
    for name, (ok, why) in (("coq", coq()), ("lean", lean_diagnose())):
        table.add_row(name, "[green]yes[/]" if ok else "[red]no[/]", why)
    Console().print(table)


@app.command()
def toy(
    out: str = typer.Option("toy_out", "--out", "-o", help="folder for results.jsonl, the PNG plots and report.md"),
    seeds: int = typer.Option(5, help="independent runs per variant"),
    steps: int = typer.Option(200, help="GRPO steps per run (Appendix A: 200)"),
    variants: str = typer.Option(
        "all", help="comma-separated: grpo-default, grpo-unlikeliness-1, grpo-unlikeliness-2, grpo-epochs-2, grpo-epochs-3"
    ),
    threads: int = typer.Option(1, help="torch threads"),
) -> None:
    """Reproduce the rank-bias toy experiment of "Rewarding the Unlikely" (arXiv:2506.02355, Appendix A)."""
    from pathlib import Path as _Path

    from rich.console import Console

    from .toy.experiment import ToyConfig
    from .toy.run import run_experiment

    chosen = None if variants == "all" else [v.strip() for v in variants.split(",") if v.strip()]
    try:
        run = run_experiment(ToyConfig(seeds=seeds, steps=steps), chosen, _Path(out), threads=threads)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from e
    t = run.timings
    Console().print(
        f"[bold]toy done in {run.wall_s:.1f}s[/] ({t.steps} variant-steps; sampling {t.sampling:.1f}s, reward "
        f"{t.reward:.1f}s, update {t.update:.1f}s, eval {t.eval:.1f}s)\nreport: {run.report}\nrecords: {run.results}"
    )


@app.command()
def check(
    problems: Path = typer.Argument(None, help="JSONL with name, header, formal_statement, proof; default: the bundled Coq sample"),
    out: Path = typer.Option(None, "--out", "-o", help="write one verdict per line here (JSONL)"),
    backend: str = typer.Option("coq", help="coq or lean"),
    workers: int = typer.Option(2, "--workers", "-k", help="prover processes"),
    timeout: float = typer.Option(30.0, help="seconds per proof"),
    stdlib: int = typer.Option(0, help="also check this many human proofs read from Coq's installed standard library"),
    show: int = typer.Option(60, help="rows of the summary table to print (0: none)"),
) -> None:
    """Check proofs and print a verdict table; exits 1 if any record's `expected` verdict is not met."""
    from rich.console import Console

    from .check import bundled_sample, check_records, read_jsonl, summary_table

    records = read_jsonl(problems) if problems else bundled_sample()
    first_stdlib = len(records)
    if stdlib:
        from .data.coq_stdlib import stdlib_sample

        records += stdlib_sample(stdlib)  # no stated expectation: see the summary line below
    console = Console()
    with open(out, "w", encoding="utf-8") if out else _null() as f:
        verdicts, summary = check_records(records, backend=backend, workers=workers, timeout=timeout, out=f)
    if show:
        console.print(summary_table(records[:show], verdicts[:show], summary))
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(summary.by_status.items()))
    console.print(f"[bold]{summary.total} checked in {summary.seconds:.1f}s[/] ({counts})")
    if stdlib:
        human = verdicts[first_stdlib:]
        console.print(f"stdlib human proofs: {sum(v.valid for v in human)}/{len(human)} valid")
        for r, v in zip(records[first_stdlib:], human):
            if not v.valid:
                console.print(f"  {r['module']}.{r['name']}: {v}")
    if summary.expected_ok or summary.expected_bad:
        console.print(f"as expected: {summary.expected_ok}/{summary.expected_ok + len(summary.expected_bad)}")
        if summary.expected_bad:
            console.print(f"[red]not as expected:[/] {', '.join(summary.expected_bad)}")
            raise typer.Exit(1)


def _null():
    import contextlib

    return contextlib.nullcontext(None)


if __name__ == "__main__":
    app()
