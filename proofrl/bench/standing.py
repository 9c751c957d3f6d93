"""Where each claim stands: every plan of an index run in order, then each claim's latest verdict.

``proofrl bench --plan docs/claims-plans.yaml --out OUT`` runs each listed plan into ``OUT/NAME`` (its own
``results.jsonl``, report and plots; one tactic-assets build in ``OUT`` serves them all), then writes

    standing.md      one row per registered claim: its latest verdict (from the last plan, in the index's order,
                     that measured it), the plan it came from, and what would tell where it cannot tell yet
    standing.json    the same rows
    claims.png       the latest verdicts' paired differences on one axis, coloured by verdict

A killed run resumes like a single plan: each plan's finished (claim, seed, size) lines are kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .claims import Claim, get_claims
from .plan import BenchPlanConfig
from .run import cli_bench, compare_from, overview_plot, size_line, unmeasured


def standing(claims: list[Claim], summaries: list[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each claim's latest measured entry over ``summaries`` (plan name, :func:`~.run.write_report`'s summary, in
    the order the plans were written), with ``from`` naming its plan; a claim no plan measured keeps the last plan's
    reason (``not_planned``) or none."""
    out: dict[str, dict[str, Any]] = {}
    for claim in claims:
        latest: dict[str, Any] = {}
        for name, summary in summaries:
            entry = summary["claims"].get(claim.name)
            if entry is None:
                continue
            if "comparison" in entry or "comparison" not in latest:  # a later plan that left it out keeps the verdict
                latest = entry | {"from": name}
        out[claim.name] = latest
    return out


def row(claim: Claim, entry: dict[str, Any]) -> dict[str, str]:
    """The table's cells for one claim: verdict (with the difference), plan, what would tell."""
    if "comparison" not in entry:
        return {"verdict": unmeasured(claim, entry) if entry else "not in any plan", "from": "", "would_tell": ""}
    c = compare_from(entry["comparison"])
    verdict = f"{c.verdict} ({claim.treatment} − {claim.baseline} = {c.difference})"
    tell = "" if c.verdict != "cannot tell at this size" else size_line(claim, c)
    return {"verdict": verdict, "from": entry["from"], "would_tell": tell}


def verb(n: int, singular: str) -> str:
    """``holds`` / ``hold``, ``does not hold`` / ``do not hold``: the verb agreeing with ``n`` claims."""
    return singular if n == 1 else singular.replace("holds", "hold").replace("does", "do")


def write_standing(out: Path, summaries: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """``OUT/standing.md``, ``standing.json`` and ``claims.png`` from the plans' summaries (see the module)."""
    claims = get_claims(None)
    latest = standing(claims, summaries)
    rows = {c.name: {"paper": c.paper, **row(c, latest[c.name])} for c in claims}
    verdicts = [e["comparison"]["verdict"] for e in latest.values() if "comparison" in e]
    decided = [v for v in verdicts if v != "cannot tell at this size"]
    holds = decided.count("holds")
    lines = [
        "# Where each claim stands",
        "",
        f"Plans, in the order they were written: {', '.join(n for n, _ in summaries)}. **{len(decided)} of "
        f"{len(claims)} claims have a verdict: {holds} {verb(holds, 'holds')}, {len(decided) - holds} "
        f"{verb(len(decided) - holds, 'does not hold')}.**",
        "",
        "| claim | paper | latest verdict | from | what would tell |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {n} | {r['paper']} | {r['verdict']} | {r['from']} | {r['would_tell']} |" for n, r in rows.items()]
    measured = [c for c in claims if "comparison" in latest[c.name]]
    if measured:
        plot = overview_plot(measured, {"claims": latest}, Path(out))
        lines += ["", f"![each claim's latest paired difference]({plot.name})"]
    Path(out, "standing.md").write_text("\n".join(lines) + "\n")
    Path(out, "standing.json").write_text(json.dumps(rows, indent=2))
    return rows


def cli_bench_plans(plans: list[tuple[str, BenchPlanConfig]], out: Path, *, workers: int = 2) -> dict[str, Any]:
    """What ``proofrl bench --plan INDEX`` calls: each plan into ``OUT/NAME``, then the standing."""
    from rich.console import Console

    console = Console()
    summaries = []
    for name, plan in plans:
        console.rule(f"plan {name}")
        summaries.append((name, cli_bench([], 3, Path(out) / name, workers=workers, plan=plan, assets_root=out)))
    rows = write_standing(Path(out), summaries)
    console.print(f"standing of {len(rows)} claims: {Path(out) / 'standing.md'}")
    return rows
