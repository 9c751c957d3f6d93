"""Tables, plots and the markdown report of the toy experiment, from its JSONL records.

Figures (PNG): ``pass32_tau5_vs_step.png`` (pass@32 at τ = 5, mean ± std band over seeds),
``pass1_tau1_vs_step.png`` (pass@1 at τ = 1), ``entropy_vs_step.png`` and ``uplift_vs_rank.png``.
``report.md`` holds the final pass@N tables (mean ± std over seeds, per τ) and the three checks of the
paper's findings, each with the numbers it rests on.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

Records = list[dict[str, Any]]


def curves(records: Records, key: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """variant -> (steps (T,), values (seeds, T)) for an eval metric."""
    by: dict[str, dict[int, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in records:
        if r.get("kind") == "eval" and key in r:
            by[r["variant"]][r["step"]][r["seed"]] = r[key]
    out = {}
    for v, steps in by.items():
        xs = sorted(steps)
        seeds = sorted(steps[xs[0]])
        out[v] = (np.array(xs), np.array([[steps[x][s] for x in xs] for s in seeds]))
    return out


def uplift_steps(records: Records) -> list[int]:
    return sorted({r["step"] for r in records if r.get("kind") == "uplift"})


def uplift_checkpoints(records: Records) -> list[int]:
    """Three steps to show uplift at: the recorded steps nearest 10 %, 25 % and 100 % of training."""
    steps = uplift_steps(records)
    if not steps:
        return []
    last = steps[-1]
    return sorted({min(steps, key=lambda s: abs(s - f * last)) for f in (0.1, 0.25, 1.0)})


def uplift_by_variant(records: Records, step: int) -> dict[str, np.ndarray]:
    """variant -> uplift rate per rank and seed at ``step``, shape (seeds, G) (NaN where no correct sample)."""
    rates: dict[str, list[list[float]]] = defaultdict(list)
    for r in records:
        if r.get("kind") == "uplift" and r["step"] == step:
            rates[r["variant"]].append(r["rates"])
    return {v: np.array(x, dtype=float) for v, x in rates.items()}


def uplift_slope(rates: np.ndarray) -> np.ndarray:
    """Least-squares slope of u_j against j, scaled to the whole rank range (u_{G-1} − u_0 of the fitted line),
    one per seed. ``(seeds, G) -> (seeds,)``; ranks with NaN are left out of the fit."""
    g = rates.shape[-1]
    out = []
    for row in rates:
        ok = ~np.isnan(row)
        out.append(np.polyfit(np.arange(g)[ok], row[ok], 1)[0] * (g - 1) if ok.sum() > 1 else np.nan)
    return np.array(out)


def _fmt(vals: np.ndarray) -> str:
    return f"{100 * vals.mean():.1f} ± {100 * vals.std():.1f}"


def passk_table(records: Records, tau: float, ks: list[int], *, prefix: str = "eval") -> str:
    """Markdown table of the final-step pass@N (%) at τ, mean ± std over seeds, one row per variant."""
    lines = ["| variant | " + " | ".join(f"pass@{k}" for k in ks) + " |", "|---|" + "---|" * len(ks)]
    cols = {k: curves(records, f"{prefix}/tau={tau:g}/pass@{k}") for k in ks}
    for v in cols[ks[0]]:
        lines.append(f"| {v} | " + " | ".join(_fmt(cols[k][v][1][:, -1]) for k in ks) + " |")
    return "\n".join(lines)


def findings(records: Records) -> list[str]:
    """The paper's three findings, each checked against these runs with an explicit criterion."""
    out = []
    p1 = curves(records, "eval/tau=1/pass@1")
    p32 = curves(records, "eval/tau=5/pass@32")
    if "grpo-default" in p1:
        steps, a = p1["grpo-default"]
        _, b = p32["grpo-default"]
        peak = int(np.argmax(b.mean(0)))
        held = a.mean(0)[-1] > a.mean(0)[0] and b.mean(0)[-1] <= b.mean(0)[peak] - 0.01
        out.append(
            f"(a) GRPO-Default: pass@1 at τ=1 goes {_fmt(a[:, 0])} → {_fmt(a[:, -1])} %; pass@32 at τ=5 goes "
            f"{_fmt(b[:, 0])} → peak {_fmt(b[:, peak])} (step {steps[peak]}) → {_fmt(b[:, -1])} % at the end. "
            "Criterion: pass@1 rises and final pass@32 is ≥ 1 point below its peak → "
            f"**{'holds' if held else 'does not hold'}**."
        )
    for v in ("grpo-unlikeliness-1", "grpo-unlikeliness-2"):
        if v in p32 and "grpo-default" in p32:
            d, u = p32["grpo-default"][1][:, -1], p32[v][1][:, -1]
            wins = int((u > d).sum())
            held = u.mean() > d.mean() + max(d.std(), u.std())
            out.append(
                f"(b) final pass@32 at τ=5: {v} {_fmt(u)} % vs GRPO-Default {_fmt(d)} % "
                f"(higher in {wins}/{len(d)} seeds, paired by seed). Criterion: mean gap larger than the larger "
                f"std → **{'holds' if held else 'does not hold'}**."
            )
    for step in uplift_checkpoints(records):
        by = uplift_by_variant(records, step)
        parts = []
        for v, rates in by.items():
            sl = uplift_slope(rates)
            parts.append(f"{v} level {np.nanmean(rates):.2f}, slope {np.nanmean(sl):+.2f} ± {np.nanstd(sl):.2f}")
        out.append(
            f"(c) uplift rate at step {step} (mean over ranks; fitted change from rank 0 to rank G−1, "
            f"mean ± std over seeds): " + "; ".join(parts) + "."
        )
    return out


def plot_all(records: Records, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for key, fname, ylabel in (
        ("eval/tau=5/pass@32", "pass32_tau5_vs_step.png", "pass@32 at τ = 5"),
        ("eval/tau=1/pass@1", "pass1_tau1_vs_step.png", "pass@1 at τ = 1"),
        ("eval/entropy", "entropy_vs_step.png", "policy entropy (nats)"),
    ):
        fig, ax = plt.subplots(figsize=(6, 4))
        for v, (xs, ys) in curves(records, key).items():
            m, s = ys.mean(0), ys.std(0)
            ax.plot(xs, m, label=v)
            ax.fill_between(xs, m - s, m + s, alpha=0.2)
        ax.set_xlabel("GRPO step")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / fname, dpi=120)
        plt.close(fig)
        paths.append(out / fname)
    checkpoints = uplift_checkpoints(records)
    fig, axes = plt.subplots(1, max(len(checkpoints), 1), figsize=(5 * max(len(checkpoints), 1), 4), squeeze=False)
    for ax, step in zip(axes[0], checkpoints, strict=False):
        for v, rates in uplift_by_variant(records, step).items():
            ax.plot(np.arange(rates.shape[1]), np.nanmean(rates, axis=0), marker=".", label=v)
        ax.set_title(f"step {step}")
        ax.set_xlabel("rank under the initial policy (0 = most likely)")
        ax.set_ylabel("uplift rate (correct samples)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "uplift_vs_rank.png", dpi=120)
    plt.close(fig)
    paths.append(out / "uplift_vs_rank.png")
    return paths


def write_report(records: Records, out: Path, *, wall_s: float | None = None) -> Path:
    """Write the plots and ``report.md`` into ``out``; return the report's path."""
    cfg = next((r for r in records if r.get("kind") == "config"), {})
    taus = cfg.get("eval_taus", [1.0, 4.0, 5.0])
    ks = cfg.get("ks", [1, 4, 8, 16, 32])
    plots = plot_all(records, out)
    parts = ["# Rank-bias toy experiment (Rewarding the Unlikely, Appendix A)", ""]
    if cfg:
        parts.append(
            f"{cfg['seeds']} seeds × {cfg['steps']} steps; {cfg['states_per_step']} states × G = "
            f"{cfg['group_size']} per step; lr {cfg['lr']}; hidden {cfg['hidden']}."
            + (f" Wall time {wall_s:.1f} s." if wall_s is not None else "")
        )
    parts += [
        "",
        "pass@N (%) at the last step, unbiased estimator over "
        f"{cfg.get('eval_samples', '?')} attempts × {cfg.get('eval_states', '?')} held-out states; "
        "mean ± std over seeds.",
        "",
    ]
    for tau in taus:
        parts += [f"## τ = {tau:g}", "", passk_table(records, tau, ks), ""]
    parts += ["## The paper's findings, checked", ""] + [f"- {f}" for f in findings(records)] + [""]
    parts += ["## Figures", ""] + [f"![{p.stem}]({p.name})" for p in plots] + [""]
    path = out / "report.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
