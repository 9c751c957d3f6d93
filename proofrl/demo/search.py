"""``proofrl demo --part search``: best-first search and reap's AND-OR MCTS with the tiny tactic model and a k-NN
memory of the training proofs on held-out stdlib theorems, at equal budget.

Both engines get the same held-out theorems (modules the model was never taught on), the same number of
policy calls per theorem (``max_steps``: best-first expansions, MCTS steps), the same tactics per call and
the same tactic timeout; each starts from a freshly loaded policy with the same seed. A theorem counts as
proved only when the search's script passed the final check in a fresh ``coqc``. Writes ``report.md``,
``summary.json``, ``proved.png`` (proved counts per engine) and ``proved_vs_budget.png`` (theorems proved
within b policy calls, read off each proof's search), plus each engine's ``results.jsonl``, trees, trace and
``view.html`` (``proofrl view``'s page, linked from the report).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..data.assets import tactic_assets
from ..runner import cpu_seconds

ENGINES = {"best-first": "reprover", "mcts": "reap"}
"""engine → the recipe holding its published defaults (ReProver's cumulative log-prob, reap's PUCT constants)"""


THEOREMS = 100
"""held-out theorems searched by each engine (a test may lower it)"""

MEMORY = True
"""the policy: k-NN proposals over a memory of the training modules' proofs beside the tiny model
(:meth:`~proofrl.data.assets.TacticAssets.memory_policy_spec`); False: the model alone. Measured on the 100
held-out theorems with best-first at this part's budget, on a shared 2-core machine: the model alone 3 proved in
104 s, memory + model 6 in 171 s (the memory alone 5 in 26 s); docs/search.md"""


def equal_budget(expansions: int, width: int, tactic_timeout: float) -> list[str]:
    """Overrides of both engines' search recipes giving them the same budget: ``expansions`` policy calls per
    theorem (``max_steps``: best-first expansions, MCTS steps; no seconds or node limit), ``width`` tactics per
    call, ``tactic_timeout`` seconds a tactic."""
    return [
        f"max_steps={expansions}",
        "seconds=null",
        f"max_nodes={10**6}",
        f"width={width}",
        f"tactic_timeout={tactic_timeout}",
    ]


SETTINGS = equal_budget(expansions=16, width=8, tactic_timeout=2.0)
"""overrides of both engines' recipes that :func:`run_part` uses (a test swaps them for smaller ones): 16 policy
calls of 8 tactics per theorem; 2 s a tactic (most of the tiny model's tactics fail at once; a loop costs this)"""


def engine_config(engine: str, overrides: list[str] | tuple[str, ...] = ()) -> Any:
    """The engine's recipe (:data:`ENGINES`) with ``overrides`` (:func:`equal_budget`)."""
    from ..search.config import load_search_config

    return load_search_config(ENGINES[engine], *overrides)


def budget(configs: dict[str, Any]) -> dict[str, Any]:
    """The budget both engines were given, read from their configs (one ConfigError line when they differ)."""
    from ..errors import ConfigError

    keys = ("max_steps", "width", "tactic_timeout")
    bf, mc = ({k: getattr(configs[e], k) for k in keys} for e in ("best-first", "mcts"))
    if bf != mc:
        raise ConfigError(f"the search part gives both engines one budget ({', '.join(keys)}): {bf} and {mc}")
    return {"expansions": bf["max_steps"], "width": bf["width"], "tactic_timeout": bf["tactic_timeout"]}


def run_part(ctx: Any) -> dict[str, Any]:
    """Search the held-out theorems with both engines; write the report, plots and ``summary.json``."""
    from rich.console import Console

    from ..policy.tactic import make_tactic_policy
    from ..search.run import search_many

    configs = {engine: engine_config(engine, SETTINGS) for engine in ENGINES}
    s = {"theorems": THEOREMS, **budget(configs)}
    console = ctx.console or Console()
    t0 = time.perf_counter()
    assets = tactic_assets(ctx.root, seed=ctx.seed, workers=ctx.workers, console=console)
    assets_seconds = time.perf_counter() - t0  # building them (once, for every proof-state part), or loading
    problems = assets.held_out_problems[:THEOREMS]
    spec = assets.memory_policy_spec() if MEMORY else assets.policy_spec
    out: Path = ctx.out
    engines: dict[str, Any] = {}
    for engine in ENGINES:
        policy = make_tactic_policy(spec, seed=ctx.seed)  # the same sample stream for both engines
        t, cpu = time.perf_counter(), cpu_seconds()
        results = search_many(problems, policy, out_dir=out / engine, workers=ctx.workers, config=configs[engine])
        seconds, cpu = time.perf_counter() - t, cpu_seconds() - cpu
        run = json.loads((out / engine / "summary.json").read_text())
        proved = [r for r in results if r.status == "proved"]
        # sound by construction: search_many says "proved" only on the fresh coqc's valid verdict
        assert all(r.verdict is not None and r.verdict.valid for r in proved)
        engines[engine] = {
            "recipe": ENGINES[engine],
            "theorems": len(results),
            "proved": len(proved),
            "status": run["status"],
            "expansions": run["expansions"],
            "steps": run["steps"],
            "seconds": round(seconds, 1),
            "cpu_seconds": round(cpu, 1),
            "outside_share": round(run["time"]["outside_share"], 4),
            "proofs": {r.name: r.proof for r in proved},
            "expansions_to_proof": sorted(r.expansions for r in proved),
        }
        console.print(f"{engine}: {len(proved)} of {len(results)} held-out theorems proved ({seconds:.0f} s)")
    plots = plot(engines, s, out)
    summary: dict[str, Any] = {
        "settings": s,
        "policy": "k-NN memory of the training proofs + the tiny model" if MEMORY else "the tiny model",
        "assets": {
            k: assets.build.get(k)
            for k in ("pairs", "teaching_seconds", "teaching_cpu_seconds", "stepping_seconds", "losses")
        },
        "engines": engines,
        "plots": [p.name for p in plots],
        "pages": view_pages(out, engines),
        "seconds": round(time.perf_counter() - t0, 1),
        "assets_seconds": round(assets_seconds, 1),
    }
    summary["assets"]["epochs"] = assets.build.get("settings", {}).get("epochs")
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "report.md").write_text(report(summary, problems))
    return summary


def view_pages(out: Path, engines: dict[str, Any]) -> dict[str, str]:
    """``proofrl view``'s page of each engine's search run, written beside it: engine → path from ``out``."""
    from ..view import write_view

    return {engine: write_view(out / engine).relative_to(out).as_posix() for engine in engines}


def plot(engines: dict[str, Any], s: dict[str, Any], out: Path) -> list[Path]:
    from ..eval.evaluate import figure

    bars = out / "proved.png"
    with figure(
        bars, "engine", "held-out theorems proved", f"{s['expansions']} policy calls of {s['width']} tactics each"
    ) as ax:
        names = list(engines)
        ax.bar(
            names,
            [engines[n]["proved"] for n in names],
            color=["tab:blue", "tab:orange"][: len(names)],
            label="passed the fresh coqc check",
        )
        ax.set_ylim(0, max(engines[n]["proved"] for n in names) * 1.2 + 1)
        for i, n in enumerate(names):
            ax.annotate(
                f"{engines[n]['proved']} / {engines[n]['theorems']}",
                (i, engines[n]["proved"]),
                ha="center",
                va="bottom",
            )
    curve = out / "proved_vs_budget.png"
    budgets = list(range(0, s["expansions"] + 1))
    with figure(curve, "budget: policy calls per theorem", "held-out theorems proved") as ax:
        for n, e in engines.items():
            ax.step(budgets, [sum(x <= b for x in e["expansions_to_proof"]) for b in budgets], where="post", label=n)
    return [bars, curve]


def report(summary: dict[str, Any], problems: list[Any]) -> str:
    s, a, engines = summary["settings"], summary["assets"], summary["engines"]
    lines = [
        "# Proof search: best-first vs reap's AND-OR MCTS",
        "",
        f"{len(problems)} held-out stdlib theorems (modules the tiny tactic model was never taught on), each engine "
        f"with {s['expansions']} policy calls of {s['width']} tactics per theorem and {s['tactic_timeout']:g} s a "
        f"tactic. The policy: {summary.get('policy', 'the tiny model')} (each call's tactics mixed, k-NN proposals "
        "ranked by similarity to remembered training states). "
        + (
            f"The model was taught on {a['pairs']} state→tactic pairs for {a['epochs']} epochs (loss "
            f"{a['losses'][0]:.2f} → {a['losses'][-1]:.2f}, {a['teaching_seconds']} s, "
            f"{a.get('teaching_cpu_seconds')} s of CPU)."
            if a.get("losses")
            else ""
        ),
        "",
        "Every proof counted here passed the final check in a fresh `coqc` (kernel, `Print Assumptions`, the "
        "statement compared); a search that reached no goals but failed that check would be `unsound`.",
        "",
        "| engine | recipe | proved | failed | unsound | error | policy calls | prover steps | seconds (CPU) | "
        "outside prover and model |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, e in engines.items():
        st = e["status"]
        lines.append(
            f"| {n} | {e['recipe']} | {e['proved']} / {e['theorems']} | {st.get('failed', 0)} | "
            f"{st.get('unsound', 0)} | {st.get('error', 0)} | {e['expansions']} | {e['steps']} | "
            f"{e['seconds']} ({e['cpu_seconds']}) | {100 * e['outside_share']:.1f} % |"
        )
    lines += [
        "",
        "![proved per engine](proved.png) ![proved vs budget](proved_vs_budget.png)",
        "",
        "The second plot reads, from the one run at the full budget, how many policy calls each proof's search "
        "had made when it found the proof.",
        "",
    ]
    for n, e in engines.items():
        if e["proofs"]:
            lines += (
                [f"Proofs found by {n}:", ""]
                + [f"- `{name}`: `{' '.join(p.split())}`" for name, p in e["proofs"].items()]
                + [""]
            )
    if summary.get("pages"):
        lines += [
            "Look at each search in a browser (every theorem's tree, its failed tactics, the proof highlighted): "
            + ", ".join(f"[{n}]({page})" for n, page in summary["pages"].items())
            + ".",
            "",
        ]
    lines += [
        "Each engine's `results.jsonl`, `trees/` and `trace.jsonl` are in its folder here. Part time: "
        f"{summary['seconds']} s, of which {summary['assets_seconds']} s building or loading the shared tactic assets.",
        "",
    ]
    return "\n".join(lines)
