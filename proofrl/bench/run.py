"""``proofrl bench``: every chosen claim, seed by seed, then the report.

Output folder::

    results.jsonl       one line per finished (claim, seed): every arm's value per theorem, seconds, CPU
                        seconds, the load average around it and the sitting's machine (:func:`machine_facts`)
    CLAIM/seed-S/       what the claim's run wrote (search results, trees)
    CLAIM.png           per claim: each arm's mean with its 95 % interval, and the paired difference
    report.md           the table of claims and one section per claim, verdict line included
    summary.json        the same numbers
    tactic-assets/      the shared tactic data and tiny model, built once (:func:`proofrl.data.assets.tactic_assets`)

A run killed part-way resumes: a (claim, seed, size) already in ``results.jsonl`` is kept, not run again.
"""

from __future__ import annotations

import functools
import json
import textwrap
from pathlib import Path
from typing import Any

from ..runner import Runner, read_rows
from .claims import Claim, ClaimRun, get_claims
from .plan import BenchPlanConfig
from .stats import Comparison, baseline_within_margin, compare, mean_interval


def run_bench(
    out: Path,
    claims: list[str] | None = None,
    *,
    seeds: int = 3,
    smoke: bool = False,
    workers: int = 2,
    console: Any = None,
    plan: BenchPlanConfig | None = None,
    assets_root: Path | None = None,
) -> dict[str, Any]:
    """Run each chosen claim that is implemented for seeds 0..seeds−1 (skipping those already in
    ``results.jsonl`` at this size), then write the report. Returns the summary. With a ``plan``
    (:mod:`.plan`), its claims at its sizes (the smoke sizes with ``smoke``) for its seeds instead. The tactic
    assets live in ``assets_root`` (default ``out``): an index of plans shares one build."""
    from rich.console import Console

    from ..data import assets as assets_mod

    console = console or Console()
    chosen = [c for c in get_claims(None) if c.name in plan.planned] if plan else get_claims(claims)
    seed_list = list(plan.seeds) if plan else list(range(seeds))
    out = Path(out)
    runner = Runner(out, ("claim", "seed", "size"), log="results.jsonl", console=console)
    todo = [c for c in chosen if c.implemented]
    machine = functools.cache(machine_facts)  # once a sitting, when its first seed runs
    assets = None
    if todo:
        settings = assets_mod.AssetsConfig(**assets_mod.SMOKE_ASSETS) if smoke else None
        root = assets_root or out
        assets = assets_mod.tactic_assets(root, seed=0, workers=workers, console=console, settings=settings)
    for claim in todo:
        size = claim_size(claim, smoke, plan)
        for seed in seed_list:
            run = ClaimRun(
                seed=seed,
                size=size,
                out=out / claim.name / f"seed-{seed}",
                workers=workers,
                assets=assets,
                console=console,
                smoke=smoke,
            )

            def measure(claim: Claim = claim, run: ClaimRun = run) -> dict[str, Any]:
                console.print(f"{claim.name} seed {run.seed}: {claim.baseline} vs {claim.treatment} on {run.size} …")
                facts = machine()  # before the claim's work, as a file-order row times its sitting before searching
                return {"arms": claim.run(run), "machine": facts}  # type: ignore[misc]

            key = {"claim": claim.name, "seed": seed, "size": size}
            kept = runner.recorded(key) is not None
            row = runner.run(key, measure, label=f"{claim.name} seed {seed}")
            if kept:
                continue
            means = {a: sum(v.values()) / max(len(v), 1) for a, v in row["arms"].items()}
            console.print(
                f"  {', '.join(f'{a} {m:.3f}' for a, m in means.items())} "
                f"({row['seconds']} s, {row['cpu_seconds']} CPU s)"
            )
    return write_report(out, get_claims(None), smoke=smoke, plan=plan)  # every claim: earlier runs' stay in


def machine_facts() -> dict[str, Any]:
    """How fast this machine is now, kept with every seed a sitting runs: Coq's pace (one fixed ``coqc`` job,
    :func:`proofrl.provers.coq.pace.machine_pace`; None without Coq), the tiny model's (one fixed generation,
    :func:`proofrl.policy.pace.model_pace`), the libraries' versions and the torch build. Claims run in
    wall-clock budgets across sessions and machines; these say which seeds ran on a slower one."""
    from ..policy.pace import model_pace
    from ..provers.coq.pace import machine_pace

    coq = machine_pace()
    return {"coq_pace_s": coq["pace_s"] if coq else None, **model_pace()}


def paces(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The range of the machine paces kept with ``rows`` (:func:`machine_facts`; rows from before they were kept
    have none), the seeds timed, the transformers versions and the CPU kernels torch chose (where kept); None when
    no row has one."""
    timed = [r["machine"] for r in rows if r.get("machine")]
    if not timed:
        return None

    def span(key: str) -> list[float] | None:
        values = [m[key] for m in timed if m.get(key) is not None]
        return [min(values), max(values)] if values else None

    return {
        "coq_s": span("coq_pace_s"),
        "model_s": span("model_pace_s"),
        "timed": len(timed),
        "of": len(rows),
        "transformers": sorted({m.get("versions", {}).get("transformers", "-") for m in timed}),
        "cpu": sorted({m["torch_build"]["cpu_capability"] for m in timed if m.get("torch_build")}),
    }


def pace_sentence(p: dict[str, Any] | None) -> str:
    """The report's sentence on :func:`paces` (empty when none was kept)."""
    if not p:
        return ""
    parts = [f"{what} {v[0]}–{v[1]} s" for what, v in (("Coq", p["coq_s"]), ("the model", p["model_s"])) if v]
    timed = f"{p['timed']} of {p['of']} seeds timed; transformers {', '.join(p['transformers'])}"
    if p.get("cpu"):
        timed += f"; CPU kernels {', '.join(p['cpu'])}"
    return f" Machine paces ({timed}): {', '.join(parts)}."


def claim_size(claim: Claim, smoke: bool, plan: BenchPlanConfig | None = None) -> int:
    """Theorems (or states) per seed: the smoke size, the plan's, or the claim's own."""
    if smoke:
        return claim.smoke_size
    planned = plan.planned.get(claim.name) if plan else None
    return planned or claim.size


def matrices(
    claim: Claim, rows: list[dict[str, Any]], size: int
) -> tuple[list[int], list[str], dict[str, list[list[float]]]]:
    """The claim's seeds, theorems (those every seed and arm measured, sorted) and each arm's seeds × theorems."""
    mine = sorted((r for r in rows if r["claim"] == claim.name and r["size"] == size), key=lambda r: r["seed"])
    by_seed = {r["seed"]: r for r in mine}  # a seed run twice (resumed) counts once: the last line
    seeds = sorted(by_seed)
    names: set[str] | None = None
    for r in by_seed.values():
        for arm in claim.arms:
            names = set(r["arms"][arm]) if names is None else names & set(r["arms"][arm])
    theorems = sorted(names or ())
    return seeds, theorems, {arm: [[by_seed[s]["arms"][arm][t] for t in theorems] for s in seeds] for arm in claim.arms}


def write_report(
    out: Path, claims: list[Claim], *, smoke: bool = False, plan: BenchPlanConfig | None = None
) -> dict[str, Any]:
    rows = read_rows(out / "results.jsonl")
    summary: dict[str, Any] = {"claims": {}}
    for claim in claims:
        entry: dict[str, Any] = {
            "paper": claim.paper,
            "statement": claim.statement,
            "arms": list(claim.arms),
            "implemented": claim.implemented,
        }
        size = claim_size(claim, smoke, plan)
        if plan is not None and plan.claims[claim.name].size is None:
            entry["not_planned"] = plan.claims[claim.name].why
        seeds, theorems, mats = matrices(claim, rows, size) if claim.implemented else ([], [], {})
        if seeds and theorems:
            a, b = mats[claim.baseline], mats[claim.treatment]
            c = compare(a, b, direction=claim.direction, margin=claim.margin)
            mine = [r for r in rows if r["claim"] == claim.name and r["size"] == size]
            entry |= {
                "seeds": seeds,
                "theorems": len(theorems),
                "size": size,
                "comparison": c.as_dict(),
                "per_seed": {arm: [round(sum(row) / len(row), 4) for row in m] for arm, m in mats.items()},
                "seconds": sum(r["seconds"] for r in mine),
                "cpu_seconds": sum(r["cpu_seconds"] for r in mine),
                "load": [min(r["load_before"] for r in mine), max(r["load_after"] for r in mine)],
                "paces": paces(mine),
                "arm_intervals": {arm: str(mean_interval(m)) for arm, m in mats.items()},
                "plot": plot(claim, c, out).name,
            }
        elif seeds:
            entry |= {"seeds": seeds, "theorems": 0, "size": size}
        summary["claims"][claim.name] = entry
    measured = [c for c in claims if "comparison" in summary["claims"][c.name]]
    if measured:
        summary["overview"] = overview_plot(measured, summary, out).name
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    summary["smoke"] = smoke
    (out / "report.md").write_text(report(claims, summary))
    return summary


def verdict_line(claim: Claim, c: Comparison) -> str:
    """``holds`` / ``does not hold`` / ``cannot tell at this size``, with the size that would tell."""
    side = ">" if claim.direction > 0 else "<"
    claimed = f"{claim.treatment} {side} {claim.baseline}"
    if c.margin:  # non-inferiority: the bound, and the p-value is the test of B − A sitting on it
        bound = -claim.direction * c.margin
        claimed = f"{claim.treatment} − {claim.baseline} {side} {bound:+.3g} (not worse by {c.margin:g} or more)"
    line = (
        f"**{c.verdict}**: {claim.treatment} − {claim.baseline} = {c.difference} (paired, 95 %), p = {c.p_value:.3g} "
        f"on {c.theorems} {claim.unit} × {c.seeds} seeds; the claim is {claimed}."
    )
    if c.verdict == "cannot tell at this size" and baseline_within_margin(c.a, claim.direction, c.margin):
        line += (
            f" The baseline's interval reaches down to the margin ({c.a.low:.3g} ≤ {c.margin:g}): an arm that scored 0"
            " everywhere would pass the same bound, so this size cannot tell 'not worse' from 'useless'; a stronger"
            " baseline (or a smaller margin with more theorems) would."
        )
    elif c.verdict == "cannot tell at this size":
        line += " " + size_line(claim, c)
    return line


def size_line(claim: Claim, c: Comparison) -> str:
    """What would tell (:func:`proofrl.bench.stats.sizes_needed`): more theorems at these seeds, else more seeds."""
    if c.theorems_needed:
        return f"About {c.theorems_needed} {claim.unit} would tell an effect of this size (80 % power)."
    if c.seeds_needed:
        return (
            f"More {claim.unit} alone would not tell: the arms' difference moves from seed to seed by more than the "
            f"effect allows at {c.seeds} seeds; about {c.seeds_needed} seeds of these {c.theorems} {claim.unit} would "
            "(80 % power)."
        )
    if c.difference.mean + claim.direction * c.margin == 0:  # the effect sizes_needed measures, as it shifts it
        seen = "The difference sits exactly on the claim's bound" if c.margin else "No difference at all was seen"
        return f"{seen}: no size follows from it."
    return f"Neither more {claim.unit} nor more seeds alone would tell an effect of this size at this spread."


def plot(claim: Claim, c: Comparison, out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = out / f"{claim.name}.png"
    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.2), gridspec_kw={"width_ratios": [2, 1]})
    for i, iv in enumerate((c.a, c.b)):
        left.errorbar([i], [iv.mean], yerr=[[iv.mean - iv.low], [iv.high - iv.mean]], fmt="o", capsize=6)
    # arm names run long ("model alone, retrieval in the prompt"): on lines of their own, they do not overlap
    left.set_xticks([0, 1], [textwrap.fill(arm, 24) for arm in (claim.baseline, claim.treatment)], fontsize=8)
    left.set_xlim(-0.5, 1.5)
    # the metric's first clause, cut at a word and on two lines: a cut mid-word read as another metric
    label = textwrap.shorten(claim.metric.split(",")[0], 60, placeholder=" …")
    left.set_ylabel(textwrap.fill(label, 32, break_on_hyphens=False), fontsize=8)
    left.set_title(f"{claim.name}: mean, 95 % interval", fontsize=9)
    d = c.difference
    right.errorbar([0], [d.mean], yerr=[[d.mean - d.low], [d.high - d.mean]], fmt="s", color="tab:red", capsize=6)
    right.axhline(0, color="grey", lw=0.8)
    right.set_xticks([0], [textwrap.fill(f"{claim.treatment} − {claim.baseline}", 28)], fontsize=8)
    right.set_title(f"paired difference, p = {c.p_value:.3g}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


VERDICT_COLOURS = {"holds": "tab:green", "does not hold": "tab:red", "cannot tell at this size": "tab:grey"}


def overview_plot(claims: list[Claim], summary: dict[str, Any], out: Path) -> Path:
    """``OUT/claims.png``: every measured claim's paired difference with its 95 % interval on one axis, turned so
    that right is the side the paper claims (direction · (treatment − baseline)), coloured by verdict; a
    non-inferiority claim's margin −δ is marked with a bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = out / "claims.png"
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(claims) + 1.2))
    for y, claim in enumerate(reversed(claims)):
        c = summary["claims"][claim.name]["comparison"]
        d = sorted(claim.direction * c["difference"][k] for k in ("low", "high"))
        mean = claim.direction * c["difference"]["mean"]
        colour = VERDICT_COLOURS.get(c["verdict"], "black")
        ax.errorbar([mean], [y], xerr=[[mean - d[0]], [d[1] - mean]], fmt="o", color=colour, capsize=4)
        if claim.margin:
            ax.plot([-claim.margin], [y], marker="|", markersize=14, color=colour)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(range(len(claims)), [c.name for c in reversed(claims)], fontsize=8)
    ax.set_xlabel("paired difference, the claimed side to the right (each claim in its own metric's units)")
    handles = [plt.Line2D([], [], marker="o", ls="", color=v) for v in VERDICT_COLOURS.values()]
    handles.append(plt.Line2D([], [], marker="|", markersize=10, ls="", color="black"))
    labels = [*VERDICT_COLOURS, "margin −δ (not worse by)"]
    ax.legend(handles, labels, fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=4, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def report(claims: list[Claim], summary: dict[str, Any]) -> str:
    lines = [
        "# proofrl bench: the papers' claims, paired, with intervals",
        "",
        "| claim | paper | arms (baseline → treatment) | baseline | treatment | difference (95 %) | p | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for claim in claims:
        e = summary["claims"][claim.name]
        if "comparison" in e:
            c = e["comparison"]
            iv = lambda x: f"{x['mean']:.3f} [{x['low']:.3f}, {x['high']:.3f}]"  # noqa: E731
            lines.append(
                f"| {claim.name} | {claim.paper} | {claim.baseline} → {claim.treatment} | "
                f"{iv(c['a'])} | {iv(c['b'])} | "
                f"{iv(c['difference'])} | {c['p_value']:.3g} | {c['verdict']} |"
            )
        else:
            arms = f"{claim.baseline} → {claim.treatment}"
            lines.append(f"| {claim.name} | {claim.paper} | {arms} | | | | | {unmeasured(claim, e)} |")
    if "overview" in summary:
        lines += ["", f"![every claim's paired difference]({summary['overview']})"]
    lines.append("")
    for claim in claims:
        e = summary["claims"][claim.name]
        lines += [
            f"## {claim.name} ({claim.paper})",
            "",
            claim.statement,
            "",
            f"Source: {claim.source}",
            "",
            f"Metric: {claim.metric}.",
        ]
        if "comparison" in e:
            cmp = compare_from(e["comparison"])
            lines += [
                "",
                verdict_line(claim, cmp),
                "",
                (
                    "Smoke size (budgets cut to check the wiring, not to measure)"
                    if summary.get("smoke")
                    else f"Size {e['size']} a seed; settings: {json.dumps(claim.settings)}"
                )
                + f"; seeds {e['seeds']}; per seed, {claim.baseline}: "
                f"{e['per_seed'][claim.baseline]}, {claim.treatment}: {e['per_seed'][claim.treatment]}. "
                f"{e['seconds']:.0f} s ({e['cpu_seconds']:.0f} CPU s of this process and its finished Coq "
                f"processes), load average {e['load'][0]}–{e['load'][1]}.{pace_sentence(e.get('paces'))}",
                "",
                f"![{claim.name}]({e['plot']})",
            ]
        else:
            why = unmeasured(claim, e)
            lines += ["", why[0].upper() + why[1:] + "."]
        lines.append("")
    return "\n".join(lines)


def unmeasured(claim: Claim, entry: dict[str, Any]) -> str:
    """Why a claim has no verdict: not implemented, no seed finished, or seeds finished whose arms share no
    theorem with a value (a metric undefined on every theorem at this size, such as an uplift slope where no group
    of samples was mixed)."""
    if not claim.implemented:
        return "not yet measured"
    if entry.get("not_planned"):
        return f"not run by the plan: {entry['not_planned']}"
    if not entry.get("seeds"):
        return "no finished seed"
    n = len(entry["seeds"])
    return f"no verdict: {n} seeds finished, but none of their {claim.unit} has a value in every arm and seed"


def compare_from(d: dict[str, Any]) -> Comparison:
    from .stats import Interval

    return Comparison(
        Interval(**d["a"]),
        Interval(**d["b"]),
        Interval(**d["difference"]),
        d["p_value"],
        d["verdict"],
        d["theorems"],
        d["seeds"],
        d["theorems_needed"],
        d.get("margin", 0.0),
        d.get("seeds_needed"),
    )


def cli_bench(
    claims: list[str] | None,
    seeds: int,
    out: Path,
    *,
    smoke: bool = False,
    workers: int = 2,
    plan: BenchPlanConfig | None = None,
    assets_root: Path | None = None,
) -> dict[str, Any]:
    """What ``proofrl bench`` calls: the run, then one verdict line per measured claim (every claim of a plan)."""
    from rich.console import Console

    console = Console()
    summary = run_bench(
        out, claims, seeds=seeds, smoke=smoke, workers=workers, console=console, plan=plan, assets_root=assets_root
    )
    for claim in get_claims(list(plan.claims) if plan else claims):
        e = summary["claims"][claim.name]
        if "comparison" in e:
            console.print(
                f"{claim.name}: {verdict_line(claim, compare_from(e['comparison'])).replace('**', '')}", markup=False
            )
        else:
            console.print(f"{claim.name}: {unmeasured(claim, e)}")
    console.print(f"report: {out / 'report.md'}")
    return summary
