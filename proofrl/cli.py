"""The ``proofrl`` command line. Each command is a thin shell over a library function."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer
from typer.core import TyperGroup

if TYPE_CHECKING:
    from .provers.base import Backend


class _Commands(TyperGroup):
    """Every command: a bad setting (:class:`~proofrl.errors.ConfigError`) or a prover that is not installed
    (:class:`~proofrl.errors.BackendUnavailable`) is one line on stderr and exit status 2, never a traceback; a
    search whose policy failed (:class:`~proofrl.errors.PolicyError`: its results so far are written) is one line
    and exit status 1."""

    def invoke(self, ctx: Any) -> Any:  # click's Context (typer's own copy of click in newer typer)
        from .errors import BackendUnavailable, ConfigError, PolicyError

        try:
            return super().invoke(ctx)
        except (ConfigError, BackendUnavailable, PolicyError) as e:
            nested: list[str] = []
            c = ctx
            while c.parent is not None:  # the group's own name as typed (`python -m proofrl.cli`) is left out
                nested.insert(0, c.info_name)
                c = c.parent
            words = ["proofrl", *nested, *([ctx.invoked_subcommand] if ctx.invoked_subcommand else [])]
            name = " ".join(words)  # `proofrl eval`, `proofrl eval tactics`
            print(f"{name}: {' '.join(str(e).split())}", file=sys.stderr)
            raise typer.Exit(1 if isinstance(e, PolicyError) else 2) from None


app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__, cls=_Commands)


def _version(show: bool) -> None:
    if show:
        from . import __version__

        typer.echo(f"proofrl {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="print the version and exit"
    ),
) -> None:
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

    from .preflight import require_backend
    from .provers import sandbox as sandboxing
    from .provers.factory import make_pool
    from .server import create_app
    from .server.config import load_serve_config
    from .server.run import run_server

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    cfg = load_serve_config(
        config,
        backend=backend,
        host=host,
        port=port,
        workers=workers,
        timeout=timeout,
        api_key=api_key,
        sandbox=sandbox,
    )
    for b in cfg.backends:
        require_backend(b)
    sb = sandboxing.configure(cfg.sandbox)  # before any prover starts; off is logged as a warning
    typer.echo(f"proofrl serve: prover sandbox {sb.mode} ({sb.reason})", err=True)
    pool_cfg = cfg.pool
    pools = {b: make_pool(b, pool=pool_cfg, **(cfg.prover if b == cfg.backends[0] else {})) for b in cfg.backends}
    try:
        run_server(create_app(pools, cfg), cfg, host=cfg.host, port=cfg.port)  # limits, drain: server/run.py
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

    from .preflight import diagnose_backend

    def coq() -> tuple[bool, str]:
        ok, why = diagnose_backend("coq")  # not installed: the reason and the command that installs it
        if not ok:
            return False, why
        idetop, coqc = shutil.which("coqidetop.opt") or shutil.which("coqidetop"), shutil.which("coqc")
        try:
            out = subprocess.run([coqc or "coqc", "--version"], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError) as e:
            return False, f"coqc --version failed: {e}"
        return True, f"{out.strip().splitlines()[0] if out.strip() else 'coqc'} ({idetop})"

    import os

    from .provers import sandbox

    sb = sandbox.resolve(os.environ.get("PROOFRL_SANDBOX", "auto"))
    table = Table("backend", "usable", "why")
    lean = diagnose_backend("lean")
    if lean[0]:
        from .provers.lean.config import diagnose as lean_diagnose

        lean = lean_diagnose()
    for name, (ok, why) in (("coq", coq()), ("lean", lean), ("sandbox", (sb.confined, f"{sb.mode}: {sb.reason}"))):
        table.add_row(name, "[green]yes[/]" if ok else "[red]no[/]", why)
    Console().print(table)


@app.command()
def toy(
    out: str = typer.Option("toy_out", "--out", "-o", help="folder for results.jsonl, the PNG plots and report.md"),
    seeds: int = typer.Option(5, help="independent runs per variant"),
    steps: int = typer.Option(200, help="GRPO steps per run (Appendix A: 200)"),
    variants: str = typer.Option(
        "all",
        help="comma-separated: grpo-default, grpo-unlikeliness-1, grpo-unlikeliness-2, grpo-epochs-2, grpo-epochs-3",
    ),
    threads: int = typer.Option(1, help="torch threads"),
) -> None:
    """Reproduce the rank-bias toy experiment of "Rewarding the Unlikely" (arXiv:2506.02355, Appendix A). A rerun
    into the same --out keeps the variants finished there (OUT/runs.jsonl)."""
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
    problems: Path = typer.Argument(
        None, help="JSONL with name, header, formal_statement, proof; default: the bundled Coq sample"
    ),
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
    from .preflight import require_backend

    require_backend(backend)
    if stdlib:
        require_backend("coq")
    records = read_jsonl(problems) if problems else bundled_sample()
    first_stdlib = len(records)
    if stdlib:
        from .data.coq_stdlib import stdlib_sample

        records += stdlib_sample(stdlib)  # no stated expectation: see the summary line below
    console = Console()
    with open(out, "w", encoding="utf-8") if out else _null() as f:
        verdicts, summary = check_records(
            records, backend=cast("Backend", backend), workers=workers, timeout=timeout, out=f
        )
    if show:
        console.print(summary_table(records[:show], verdicts[:show], summary))
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(summary.by_status.items()))
    console.print(f"[bold]{summary.total} checked in {summary.seconds:.1f}s[/] ({counts})")
    if stdlib:
        human = verdicts[first_stdlib:]
        console.print(f"stdlib human proofs: {sum(v.valid for v in human)}/{len(human)} valid")
        for r, v in zip(records[first_stdlib:], human, strict=True):
            if not v.valid:
                console.print(f"  {r['module']}.{r['name']}: {v}")
    if summary.expected_ok or summary.expected_bad:
        console.print(f"as expected: {summary.expected_ok}/{summary.expected_ok + len(summary.expected_bad)}")
        if summary.expected_bad:
            console.print(f"[red]not as expected:[/] {', '.join(summary.expected_bad)}")
            raise typer.Exit(1)


@app.command()
def demo(
    out: Path = typer.Option(Path("runs/demo"), "--out", "-o", help="folder: one sub-folder per part, report.md"),
    part: list[str] = typer.Option(
        [],
        "--part",
        help="run only this part (repeatable): whole-proof, search, "
        "expert-iteration, step-level, eva; default: all, in that order",
    ),
    rl_steps: int = typer.Option(12, help="whole-proof: GRPO steps per variant"),
    eval_problems: int = typer.Option(48, help="whole-proof: held-out theorems evaluated before and after"),
    sft_epochs: int = typer.Option(12, help="whole-proof: epochs of supervised teaching on human proofs"),
    workers: int = typer.Option(2, "--workers", "-k", help="Coq processes"),
    seed: int = typer.Option(0),
    threads: int = typer.Option(
        1, help="torch threads; 1 leaves the other cores to Coq, and a tiny model gains nothing from more"
    ),
    set_: list[str] = typer.Option(
        [], "--set", help="whole-proof: override the demo recipe: key.sub=value (repeatable)"
    ),
) -> None:
    """The whole system on a CPU, in parts that each run alone (--part): whole-proof GRPO with and without the
    unlikeliness reward, proof search, search-and-learn, step-level RL and the EVA reward model, each with a
    report and plots, judged by Coq. A rerun into the same --out keeps the parts finished there (OUT/runs.jsonl)."""
    from .demo import demo_config, part_names, run_parts
    from .preflight import require_backend

    names = part_names(part)  # an unknown part is one line now
    require_backend("coq")
    # the thread count is one of the whole-proof part's settings: kept in each GRPO run's config.yaml and in the
    # demo's runs.jsonl, so a rerun with another count is refused rather than mixed in
    threads_set = [f"threads={threads}"] if threads else []
    overrides = [f"steps={rl_steps}", f"data.eval_limit={eval_problems}", *threads_set, *set_]
    demo_config(overrides)  # a bad override is one line now, not a traceback after the teaching
    torch_threads(threads)
    run_parts(out, names, seed=seed, workers=workers, whole_proof={"overrides": overrides, "sft_epochs": sft_epochs})


@app.command()
def bench(
    claim: list[str] = typer.Option([], "--claim", help="run only this claim (repeatable); default: all"),
    seeds: int = typer.Option(None, "--seeds", min=1, help="seeds 0..N-1 (default 3), each arm on the same theorems"),
    plan: Path = typer.Option(
        None,
        "--plan",
        help="a plan (docs/claims-plan.yaml): its claims, sizes and seeds instead of --claim/--seeds; or an index of "
        "plans (docs/claims-plans.yaml): each into OUT/NAME, then OUT/standing.md, each claim's latest verdict",
    ),
    out: Path = typer.Option(Path("runs/bench"), "--out", "-o", help="folder: results.jsonl, report.md, plots"),
    workers: int = typer.Option(2, "--workers", "-k", help="Coq processes"),
    smoke: bool = typer.Option(False, "--smoke", help="a few theorems and a tiny model: checks the wiring in seconds"),
    threads: int = typer.Option(1, help="torch threads; 1 leaves the other cores to Coq"),
) -> None:
    """The papers' claims as paired experiments over seeds: each arm's mean with a 95 % interval, the paired
    difference, a permutation p-value and a verdict (holds / does not hold / cannot tell at this size).
    A killed run resumes: finished (claim, seed) pairs in OUT/results.jsonl are kept."""
    from .bench.claims import CLAIMS, get_claims
    from .bench.plan import load_plans
    from .bench.run import cli_bench
    from .bench.standing import cli_bench_plans
    from .errors import ConfigError
    from .preflight import require_backend

    get_claims(claim)  # an unknown claim is one line now
    if plan is not None and (claim or seeds is not None):
        raise ConfigError("--plan sets the claims, sizes and seeds: leave out --claim and --seeds")
    index, plans = load_plans(plan, {n: c.arms for n, c in CLAIMS.items()}) if plan is not None else (False, [])
    if index and smoke:
        raise ConfigError("--smoke runs one plan (or none): give a plan file, not an index of plans")
    require_backend("coq")
    torch_threads(threads)
    if index:
        cli_bench_plans(plans, out, workers=workers)
    else:
        cli_bench(list(claim), seeds or 3, out, smoke=smoke, workers=workers, plan=plans[0][1] if plans else None)


@app.command()
def train(
    recipe: str = typer.Option(
        ...,
        help="a recipe name (whole-proof: unlikeliness, kimina, deepseek-v1.5, demo; "
        "search-and-learn: reap; step-level: leanlistener; reward model: eva) or a YAML path",
    ),
    set_: list[str] = typer.Option([], "--set", help="override: key.sub=value (repeatable), e.g. model.path=DIR"),
    out: str = typer.Option(None, "--out", "-o", help="run folder (default: the recipe's); a rerun resumes there"),
    show_config: bool = typer.Option(False, help="print the resolved config and exit"),
    threads: int = typer.Option(None, help="torch CPU threads (default: torch's choice)"),
    engine: str = typer.Option(
        "proofrl", help="proofrl (this process) or verl (writes verl's Hydra overrides and launches verl)"
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="--engine verl: print the overrides and exit"),
) -> None:
    """Train by a recipe: whole-proof GRPO, search-and-learn (reap), step-level GRPO (leanlistener) or the EVA
    reward model (eva); checkpoints and resumes in --out."""
    from .errors import ConfigError
    from .train import recipes

    if engine not in ("proofrl", "verl"):
        raise ConfigError(f"--engine {engine!r}: valid: proofrl, verl")
    overrides = [*set_, *([f"out={out}"] if out else [])]
    if engine == "verl":
        from .verl.launch import cli_launch  # the verl integration (the distributed extra)

        cli_launch(recipe, overrides, dry_run=dry_run)
        return
    torch_threads(threads)
    loop, cfg = recipes.load(recipe, overrides)  # the recipe's loop and its checked config
    if show_config:
        import yaml

        typer.echo(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
        return
    loop.train(cfg)  # the loop's runner, e.g. proofrl.train.whole_proof:run


eval_app = typer.Typer(cls=_Commands, invoke_without_command=True, no_args_is_help=False)
app.add_typer(eval_app, name="eval")


@eval_app.callback()
def eval_(
    ctx: typer.Context,
    model: Path = typer.Option(None, exists=True, file_okay=False, help="local Hugging Face model directory"),
    problems: str = typer.Option(None, help="JSONL problems, or coq-stdlib:train / coq-stdlib:held-out"),
    prompt_format: str = typer.Option("coq", "--format", help="prompt format (see proofrl.policy.prompts.FORMATS)"),
    samples: int = typer.Option(32, "-n", help="samples per problem (up to 512)"),
    ks: str = typer.Option("1,8,32", help="comma-separated k for pass@k"),
    baseline: Path = typer.Option(
        None, exists=True, file_okay=False, help="initial model: adds the uplift rate of --model over it"
    ),
    out: Path = typer.Option(Path("runs/eval"), "--out", "-o"),
    split: str = typer.Option("", help="keep records of this split (valid/test)"),
    limit: int = typer.Option(None, help="at most this many problems"),
    backend: str = typer.Option(None, help="coq or lean (default: the problems')"),
    workers: int = typer.Option(2, "--workers", "-k"),
    timeout: float = typer.Option(60.0),
    server_url: str = typer.Option("", help="verify through a running proofrl/kimina server"),
    temperature: float = typer.Option(1.0),
    top_p: float = typer.Option(1.0),
    max_tokens: int = typer.Option(512),
    seed: int = typer.Option(0),
    threads: int = typer.Option(None, help="torch CPU threads (default: torch's choice)"),
) -> None:
    """pass@N of whole proofs by both estimators, unique valid proofs, optional uplift rate, plots and a markdown
    report (`proofrl eval --model DIR --problems FILE`); `proofrl eval tactics` and `proofrl eval rm` evaluate a
    tactic model and a reward model."""
    if ctx.invoked_subcommand is not None:
        return
    if model is None or problems is None:
        raise typer.BadParameter("give --model DIR and --problems FILE (or a subcommand: tactics, rm)")

    from rich.console import Console

    from .preflight import require_backend
    from .progress import progress_bar

    k_list, fmt, probs = _eval_inputs(problems, prompt_format, samples, ks, split, limit)
    be = backend or probs[0].backend
    if not server_url:
        require_backend(be)
    from .eval.evaluate import evaluate, markdown_table
    from .policy.generation import HFGenerator
    from .policy.model import load_policy
    from .verification import Verifier

    torch_threads(threads)
    out.mkdir(parents=True, exist_ok=True)
    console = Console()
    m, tok = load_policy(model)
    verifier = Verifier(server_url=server_url or None, timeout=timeout, backend=be, workers=workers)  # owns its pool
    base_res = None
    try:
        with progress_bar(console=console) as bar:

            def run(policy: Any, label: str, what: str, **extra: Any) -> Any:
                """The model and the baseline are sampled and judged alike, each with its own progress bar."""
                task = bar.add_task(what, total=len(probs))
                return evaluate(
                    HFGenerator(policy, tok),
                    probs,
                    fmt,
                    verifier,
                    n=samples,
                    ks=k_list,
                    temperature=temperature,
                    top_p=top_p,
                    max_tokens=max_tokens,
                    seed=seed,
                    tokenizer=tok,
                    label=label,
                    on_chunk=lambda k: bar.update(task, advance=k),
                    **extra,
                )

            res = run(m, model.name, "sampling and verifying", samples_path=out / "samples.jsonl")
            if baseline is not None:
                base, _ = load_policy(baseline)
                base_res = run(base, baseline.name, "sampling from the baseline (uplift rate)")
    finally:
        verifier.close()
    _eval_report(
        out,
        model.name,
        f"on {len(probs)} problems from `{problems}`, {samples} samples each",
        res,
        (base, m, tok, base_res) if base_res is not None else None,
    )
    console.print(markdown_table({model.name: res}))
    console.print(f"report: {out / 'report.md'}")


def _eval_inputs(problems: str, prompt_format: str, samples: int, ks: str, split: str, limit: int | None) -> tuple:
    """``proofrl eval``'s checked inputs: the k of pass@k, the prompt format and the problems (a bad one is a
    usage error, not a traceback)."""
    from .data.splits import problem_set
    from .errors import ConfigError
    from .policy.prompts import get_format
    from .preflight import require_backend

    if not 1 <= samples <= 512:
        raise typer.BadParameter("-n must be between 1 and 512")
    if problems.startswith("coq-stdlib"):
        require_backend("coq")  # the problems are read where coqc says the standard library is
    try:
        k_list = tuple(sorted({int(k) for k in ks.split(",") if k.strip()}))
        fmt = get_format(prompt_format)
        probs = problem_set(problems, split=split or None, limit=limit)
    except ConfigError:
        raise
    except (ValueError, FileNotFoundError) as e:
        raise typer.BadParameter(str(e)) from e
    if not probs:
        raise typer.BadParameter(f"no problems in {problems}")
    return k_list, fmt, probs


def _eval_report(out: Path, name: str, what: str, res: Any, baseline: tuple | None) -> None:
    """``summary.json``, the pass@k plot and ``report.md`` of ``proofrl eval``; with ``baseline`` (its model,
    the evaluated model, the tokenizer, its results) the uplift rate too."""
    import json

    from .eval.evaluate import markdown_table, plot_pass_at_k, plot_uplift, uplift_between

    summary = {"eval": res.to_json()}
    plot_pass_at_k({name: res}, out / "pass_at_k.png")
    report = [
        "# proofrl eval",
        "",
        f"`{name}` {what}.",
        "",
        markdown_table({name: res}),
        "",
        "![pass@k](pass_at_k.png)",
        "",
    ]
    if baseline is not None:
        base, m, tok, base_res = baseline
        u = uplift_between(base, m, tok, base_res.groups)
        summary["baseline"], summary["uplift"] = base_res.to_json(), u.to_json()
        plot_uplift({name: u}, out / "uplift.png")
        report += [
            "## Uplift rate over the baseline",
            "",
            "Rank 0 = the baseline's most likely sample.",
            "",
            " ".join(f"{r:.2f}" if r == r else "–" for r in u.rates),
            "",
            "![uplift](uplift.png)",
            "",
        ]
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "report.md").write_text("\n".join(report))


@app.command("filter")
def filter_(
    model: Path = typer.Option(..., exists=True, file_okay=False, help="the base model (local Hugging Face folder)"),
    problems: str = typer.Option(..., help="JSONL problems, or coq-stdlib:train (the set to curate)"),
    out: Path = typer.Option(Path("runs/filter"), "--out", "-o", help="win_rates.jsonl, filtered.jsonl; resumes"),
    samples: int = typer.Option(8, "-n", help="samples per problem (kimina: 8 rollouts)"),
    backend: str = typer.Option("hf", help="hf (transformers) or vllm (the engine in this process)"),
    max_win_rate: float = typer.Option(0.5, help="drop problems won more often than this (kimina: 0.5)"),
    duplicate_below: float = typer.Option(0.25, help="repeat problems won less often than this (negative: never)"),
    copies: int = typer.Option(2, help="how many times a hard problem appears"),
    prompt_format: str = typer.Option("coq", "--format", help="prompt format (see proofrl.policy.prompts.FORMATS)"),
    split: str = typer.Option("", help="keep records of this split (valid/test)"),
    limit: int = typer.Option(None, help="at most this many problems"),
    workers: int = typer.Option(2, "--workers", "-k", help="prover processes verifying at once"),
    timeout: float = typer.Option(60.0, help="seconds per verification"),
    temperature: float = typer.Option(1.0),
    max_tokens: int = typer.Option(512),
    seed: int = typer.Option(0),
) -> None:
    """kimina-prover-rl's data filter: sample the base model -n times per problem, verify every sample, write each
    problem's win rate, then the set without the problems won more than half the time and with the hard ones
    repeated (OUT/filtered.jsonl: proofrl train --set data.train=OUT/filtered.jsonl). A killed run resumes."""
    from rich.console import Console

    from .errors import ConfigError
    from .eval.evaluate import evaluate
    from .eval.win_rates import FilterRule, measure_and_filter
    from .preflight import require_backend
    from .progress import progress_bar
    from .verification import Verifier

    if backend not in ("hf", "vllm"):
        raise ConfigError(f"--backend {backend!r}: choose hf or vllm")
    if not 0.0 <= max_win_rate <= 1.0 or copies < 1:
        raise ConfigError("--max-win-rate must be in [0, 1] and --copies at least 1")
    _, fmt, probs = _eval_inputs(problems, prompt_format, samples, "1", split, limit)
    require_backend(probs[0].backend)
    if backend == "vllm":
        from transformers import AutoTokenizer

        from .policy.generation import VLLMGenerator

        try:
            generator: Any = VLLMGenerator(model)
        except ImportError as e:
            raise ConfigError(str(e)) from None
        tok: Any = AutoTokenizer.from_pretrained(model)
    else:
        from .policy.generation import HFGenerator
        from .policy.model import load_policy

        m, tok = load_policy(model)
        generator = HFGenerator(m, tok)
    position = {p.key: i for i, p in enumerate(probs)}
    verifier = Verifier(timeout=timeout, backend=probs[0].backend, workers=workers)

    def sample_and_judge(part: Any) -> list[list[bool]]:
        res = evaluate(
            generator, part, fmt, verifier, n=samples, ks=(1,), temperature=temperature, max_tokens=max_tokens,
            seed=seed + position[part[0].key], tokenizer=tok,
        )  # fmt: skip
        return [r.correct for r in res.results]

    rule = FilterRule(max_win_rate, duplicate_below if duplicate_below >= 0 else None, copies)
    key = {"model": str(model.resolve()), "problems": problems, "temperature": temperature, "max_tokens": max_tokens,
           "seed": seed, "format": prompt_format, "backend": backend}  # fmt: skip
    try:
        with progress_bar(console=Console()) as bar:
            task = bar.add_task(f"sampling {samples} and verifying, per problem", total=len(probs))
            summary = measure_and_filter(
                probs, sample_and_judge, out, n=samples, run_key=key, rule=rule,
                on_problems=lambda k: bar.update(task, advance=k),
            )  # fmt: skip
    finally:
        verifier.close()
    print(
        f"{summary['problems']} problems, mean win rate {summary['mean_win_rate']:.3f}: {summary['dropped_as_easy']} "
        f"dropped as easy, {summary['repeated']} repeated ×{copies}, {summary['filtered_set']} in "
        f"{out / 'filtered.jsonl'}"
    )


@app.command()
def search(
    problems: str = typer.Argument(
        ...,
        help="JSONL problems (miniF2F-style), coq-stdlib:held-out / coq-stdlib:train, "
        "or a library corpus split: coq-lib:mathcomp:test",
    ),
    algorithm: str = typer.Option("mcts", help="mcts (reap's AND-OR MCTS) or best-first, or a recipe name"),
    policy: str = typer.Option(
        ...,
        help="tactic policy: hf:DIR, vllm:DIR, openai:URL, openai-chat:URL, a proof memory knn:DIR or "
        "knn-online:DIR, the automation menu auto[:T,...], or several joined by + (any order)",
    ),
    model: str = typer.Option(None, help="model name sent to an OpenAI-compatible endpoint"),
    out: Path = typer.Option(Path("runs/search"), "--out", "-o"),
    save_memory: Path = typer.Option(
        None,
        "--save-memory",
        help="knn-online: where the memory is saved at the end (default: OUT/memory; may be the folder it was "
        "loaded from, to update it)",
    ),
    recipe: str = typer.Option(
        None, help="defaults: reap, bfs-prover, reprover (proofrl/recipes/search/NAME.yaml) or a YAML file"
    ),
    set_: list[str] = typer.Option(
        [], "--set", help="override a search setting: key=value (repeatable), e.g. c_base=1000"
    ),
    workers: int = typer.Option(1, "--workers", "-k", help="prover processes (theorems searched at once)"),
    expansions: int = typer.Option(None, help="best-first: expansions per theorem (the max_steps key)"),
    max_steps: int = typer.Option(None, help="MCTS: simulations per theorem (the max_steps key)"),
    max_nodes: int = typer.Option(None, help="MCTS: nodes per theorem"),
    width: int = typer.Option(None, help="tactics proposed per expansion"),
    seconds: float = typer.Option(None, help="wall-clock budget per theorem"),
    tactic_timeout: float = typer.Option(None, help="seconds per tactic"),
    value: str = typer.Option(None, help="MCTS leaf value: none or endpoint:URL (reap's value service)"),
    api_key: str = typer.Option(None, envvar="OPENAI_API_KEY", help="bearer key for an openai:/openai-chat: policy"),
    limit: int = typer.Option(None, help="at most this many problems"),
    threads: int = typer.Option(None, help="torch CPU threads (default: torch's choice)"),
    ray: str = typer.Option(
        None,
        "--ray",
        help="spread theorems over search workers on the Ray cluster at ADDRESS "
        "(`auto`, `local`, or host:port; the distributed extra)",
    ),
) -> None:
    """Proof search over prover states; a theorem is `proved` only when a fresh final check accepts the proof
    the search found (results.jsonl, trees/NAME.json, trace.jsonl, summary.json in --out)."""
    from .data.splits import problem_set
    from .preflight import require_backend
    from .search.run import cli_search

    try:
        probs = problem_set(problems, limit=limit)
    except (ValueError, FileNotFoundError) as e:
        raise typer.BadParameter(str(e)) from e
    if not probs:
        raise typer.BadParameter(f"no problems in {problems}")
    require_backend(probs[0].backend)
    kinds = _policy_kinds(policy)
    if ray and ("knn-online" in kinds or save_memory):
        from .errors import ConfigError

        raise ConfigError(
            "--policy knn-online:DIR / --save-memory: an online proof memory learns in one process; with --ray each "
            "worker would learn apart and keep nothing: use knn:DIR with --ray"
        )
    torch_threads(threads)
    policy_obj = None
    if kinds & {"openai", "openai-chat"}:
        from .search.policy import policy_from_spec

        policy_obj = policy_from_spec(policy, model, api_key=api_key)
    options: dict[str, Any] = dict(
        recipe=recipe,
        workers=workers,
        max_steps=max_steps,
        max_nodes=max_nodes,
        expansions=expansions,
        width=width,
        seconds=seconds,
        tactic_timeout=tactic_timeout,
        value=value,
        overrides=list(set_),
    )
    if ray:
        from .distributed.search import cli_search_ray  # the distributed extra

        cli_search_ray(ray, probs, algorithm, policy, model, out, api_key=api_key, **options)
        return
    cli_search(probs, algorithm, policy, model, out, policy_obj=policy_obj, save_memory=save_memory, **options)


def _policy_kinds(spec: str) -> set[str]:
    """The source kinds of a ``--policy`` spec, each part checked (in any order): a bad part is one line, and a
    model folder that is not there is named alone (not with the sources joined after it)."""
    from .errors import ConfigError
    from .policy.sources import SPEC_FORMS, spec_parts

    parts = spec_parts(spec)
    for kind, where in parts:
        if kind in ("hf", "vllm") and not Path(where).is_dir():
            joined = f" (sources are joined by + before one of {SPEC_FORMS})" if "+" in where else ""
            raise ConfigError(
                f"--policy: no model directory at {where!r} (models are loaded from local paths only){joined}"
            )
    return {kind for kind, _ in parts}


@app.command()
def view(
    run_dir: Path = typer.Argument(..., help="a `proofrl search --out` folder, or a folder holding several (a demo's)"),
) -> None:
    """Write one self-contained HTML page per search run (RUN/view.html): each theorem's status and proof, its
    AND-OR tree (priors, visits, values, Q/U, failed tactics, the proof highlighted) and where the time went."""
    from .view import write_views

    for page in write_views(run_dir):
        typer.echo(str(page))


# -- eval tactics (LeanListener's tactic metrics): @eval_app.command("tactics") --
@eval_app.command("tactics")
def eval_tactics(
    model: Path = typer.Option(..., help="local Hugging Face tactic model directory"),
    states: Path = typer.Option(..., help="tactic transitions JSONL (python -m proofrl.data.tactics): its states"),
    k: int = typer.Option(8, "-k", help="tactics sampled per state (Prec@k)"),
    out: Path = typer.Option(Path("runs/eval-tactics"), "--out", "-o"),
    limit: int = typer.Option(200, help="at most this many states (a fixed random subset)"),
    theorems: int = typer.Option(0, help="also search this many of the states' theorems (proving rate and time)"),
    expansions: int = typer.Option(8, help="best-first expansions per theorem (width k)"),
    search_seconds: float = typer.Option(60.0, help="seconds per theorem searched"),
    timeout: float = typer.Option(10.0, help="seconds per tactic"),
    workers: int = typer.Option(2, "--workers", help="prover processes"),
    seed: int = typer.Option(0),
    threads: int = typer.Option(None, help="torch CPU threads (default: torch's choice)"),
) -> None:
    """Prec@k, 0-precision and mean length of sampled tactics on held-out states, optionally the proving rate
    under best-first search at a fixed budget (LeanListener's metrics); report.md, prec.png, summary.json."""
    from .errors import ConfigError
    from .eval.tactics import cli_eval_tactics
    from .preflight import require_backend

    if not model.is_dir():
        raise ConfigError(f"--model: no model directory at {str(model)!r}")
    require_backend("coq")
    torch_threads(threads)
    cli_eval_tactics(
        model,
        states,
        k,
        out,
        limit=limit,
        theorems=theorems,
        expansions=expansions,
        search_seconds=search_seconds,
        timeout=timeout,
        workers=workers,
        seed=seed,
    )


# -- eval rm (the EVA reward model's metrics): @eval_app.command("rm") --
@eval_app.command("rm")
def eval_rm(
    data: Path = typer.Option(..., help="held-out EVA JSONL (state, proposal, critique, scores)"),
    model: Path = typer.Option(None, help="a trained EVA model directory (proofrl train --recipe eva)"),
    train_data: Path = typer.Option(
        None, "--train", help="training JSONL: with --base, trains and scores Table 4's models"
    ),
    base: Path = typer.Option(None, help="base model directory for Table 4"),
    out: Path = typer.Option(Path("runs/eval-rm"), "--out", "-o"),
    epochs: int = typer.Option(3),
    lr: float = typer.Option(2e-5),
    batch: int = typer.Option(8),
    alpha: float = typer.Option(0.5),
    max_new_tokens: int = typer.Option(96),
    seed: int = typer.Option(0),
    threads: int = typer.Option(None, help="torch CPU threads (default: torch's choice)"),
) -> None:
    """A process reward model on held-out judged proposals: MSE per dimension, Pearson r, ranking accuracy
    (greedy decoding); with --train and --base, the EVA paper's Table 4 (zero-shot, SFT-only, value head, EVA)."""
    from .errors import ConfigError

    torch_threads(threads)
    if train_data is not None or base is not None:  # Table 4 trains and compares its models: an experiment
        if train_data is None or base is None:
            raise ConfigError("Table 4 needs both --train (JSONL) and --base (a model directory)")
        from .bench.eva_table4 import cli_table4

        cli_table4(
            data,
            train=train_data,
            base=base,
            out=out,
            epochs=epochs,
            lr=lr,
            batch=batch,
            alpha=alpha,
            max_new_tokens=max_new_tokens,
            seed=seed,
        )
        return
    if model is None:
        raise ConfigError("give --model DIR (a trained EVA model), or --train and --base for Table 4")
    from .eval.rm import cli_eval_rm

    cli_eval_rm(data, model=model, out=out, max_new_tokens=max_new_tokens)


# -- eval search (the CPU provers side by side): @eval_app.command("search") --
@eval_app.command("search")
def eval_search(
    problems: str = typer.Argument(
        ...,
        help="a problem set as `proofrl search` names it: FILE.jsonl or FILE.jsonl:SPLIT (miniF2F-rocq), "
        "coq-stdlib:held-out, coq-lib:mathcomp:test; or coq-stdlib-files:N, N stdlib files proved in order",
    ),
    rows: str = typer.Option(
        None,
        help="a: Coq's automation, b: CoqHammer, c: proofrl search, d: search + automation, e/f: k-NN over a "
        "proof memory offline/online, g: f + automation, h: g + premise retrieval, i: h + the tactic model reading "
        "the retrieved context, j: h + a CoqHammer tactic at every node, k: that model alone, the memory and premises "
        "only in its prompt (default: every row; coq-stdlib-files:N runs a,b,e-k; b and j left out without CoqHammer)",
    ),
    seconds: float = typer.Option(10.0, help="wall-clock budget per theorem, every row"),
    policy: str = typer.Option(None, help="tactic model for c/d: hf:DIR (default: the tiny model, built once)"),
    workers: int = typer.Option(2, "--workers", "-k", help="theorems at once (Coq processes)"),
    limit: int = typer.Option(None, help="this many theorems, drawn with --seed (default: all)"),
    split: str = typer.Option(None, help="keep records of this split of a JSONL file (test/valid)"),
    seed: int = typer.Option(0),
    tactics: str = typer.Option(
        "lia,nia,lra,nra,ring,field,auto,easy,tauto,intuition", help="row a's automation tactics (and d's)"
    ),
    engines: str = typer.Option("best-first,mcts", help="search engines of rows c/d"),
    memory_engine: str = typer.Option("best-first", help="search engine of rows e-k: best-first or mcts"),
    width: int = typer.Option(4, help="tactics the model proposes per node"),
    atp_seconds: int = typer.Option(5, help="hammer: Set Hammer ATPLimit"),
    node_hammer: str = typer.Option("sauto", help="row j's CoqHammer tactic at every node: sauto, qauto or hauto"),
    node_hammer_seconds: float = typer.Option(
        1.0, help="cap on each call of row j's CoqHammer tactic (the search's step limit applies too)"
    ),
    context_model: Path = typer.Option(
        None, help="rows i and k's tactic model (default: one taught with retrieved context, built once under --assets)"
    ),
    assets: Path = typer.Option(
        Path("runs"), help="where the default models and the memory's transitions are built, once"
    ),
    out: Path = typer.Option(Path("runs/eval-search"), "--out", "-o"),
) -> None:
    """Coq's one-shot automation, CoqHammer and proofrl search side by side, every theorem with the same wall
    budget and every proof rechecked by a fresh coqc (report.md, summary.json, results.jsonl in --out)."""
    from .eval.search_command import cli_eval_search

    cli_eval_search(
        problems,
        rows=rows,
        seconds=seconds,
        policy=policy,
        workers=workers,
        limit=limit,
        split=split,
        seed=seed,
        tactics=tactics,
        engines=engines,
        memory_engine=memory_engine,
        width=width,
        atp_seconds=atp_seconds,
        node_hammer=node_hammer,
        node_hammer_seconds=node_hammer_seconds,
        context_model=context_model,
        assets=assets,
        out=out,
        command=" ".join(["proofrl", *sys.argv[1:]]),
    )


def torch_threads(threads: int | None = None) -> None:
    """Set PyTorch's CPU threads (default: torch's own choice). Prover processes run beside the policy, so
    more threads than free cores makes every matmul wait (measured: 20× slower sampling on 2 busy cores)."""
    import torch

    if threads:
        torch.set_num_threads(threads)


def _null():
    import contextlib

    return contextlib.nullcontext(None)


if __name__ == "__main__":
    app()
