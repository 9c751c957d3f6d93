"""``proofrl eval``: N samples per problem, pass@N by both estimators, unique proofs, uplift, plots, a report.

* pass@k — the unbiased estimator and the paper's chunked estimate (:mod:`proofrl.eval.passk`, the one
  implementation), for every k ≤ N that divides N.
* unique proofs — distinct valid proofs per problem (after whitespace normalisation), the diversity measure
  of "Rewarding the Unlikely" §6.
* uplift rate between two checkpoints (:mod:`proofrl.eval.uplift`): the samples drawn from the first model
  are scored by both; rank 0 = most likely under the first.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..policy.generation import Generator, SamplingConfig, encode_prompts
from ..policy.logprobs import response_logprobs
from ..policy.prompts import PromptFormat
from ..problems import Problem
from ..rewards.unlikeliness import sequence_logprob
from ..rollout.proofs import Group, first_turn, sample_and_verify
from ..verification import Verifier
from .passk import pass_at_k_chunked, pass_at_k_unbiased
from .uplift import UpliftRate, uplift_rate


def _normalise(proof: str) -> str:
    return re.sub(r"\s+", " ", proof).strip()


@dataclass
class ProblemResult:
    name: str
    correct: list[bool]
    statuses: list[str]
    unique_valid: int

    @property
    def solved(self) -> bool:
        return any(self.correct)


@dataclass
class EvalResult:
    """Outcomes of N samples on each problem, and the pass@k table derived from them."""

    label: str
    results: list[ProblemResult]
    ks: tuple[int, ...]
    seconds: float = 0.0
    groups: list[Group] = field(default_factory=list, repr=False)

    @property
    def n(self) -> int:
        return len(self.results[0].correct) if self.results else 0

    def correct_matrix(self) -> torch.Tensor:
        return torch.tensor([r.correct for r in self.results], dtype=torch.bool)

    def pass_at(self, k: int) -> dict[str, float]:
        """{"unbiased": …, "chunked": …, "chunked_std": …} as fractions; chunked only when k divides N."""
        c = self.correct_matrix()
        out = {"unbiased": float(pass_at_k_unbiased(self.n, c.sum(-1), k).mean())}
        if self.n % k == 0:
            ch = pass_at_k_chunked(c, k)
            out.update(chunked=ch.mean, chunked_std=ch.std)
        return out

    def table(self) -> dict[int, dict[str, float]]:
        return {k: self.pass_at(k) for k in self.ks if k <= self.n}

    def to_json(self) -> dict[str, Any]:
        statuses: dict[str, int] = {}
        for r in self.results:
            for s in r.statuses:
                statuses[s] = statuses.get(s, 0) + 1
        return {
            "label": self.label,
            "problems": len(self.results),
            "samples_per_problem": self.n,
            "pass_at": {str(k): v for k, v in self.table().items()},
            "solved": sum(r.solved for r in self.results),
            "unique_valid_proofs": sum(r.unique_valid for r in self.results),
            "verdicts": statuses,
            "slowest_verdict_s": max((v.seconds for g in self.groups for v in g.verdicts), default=0.0),
            "seconds": self.seconds,
        }


def evaluate(
    generator: Generator,
    problems: Sequence[Problem],
    fmt: PromptFormat,
    verifier: Verifier,
    *,
    n: int = 32,
    ks: Sequence[int] = (1, 8, 32),
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_tokens: int = 512,
    seed: int = 0,
    tokenizer: Any = None,
    chunk_prompts: int = 4,
    label: str = "eval",
    samples_path: Path | None = None,
    on_chunk: Callable[[int], None] | None = None,
) -> EvalResult:
    """Sample ``n`` proofs per problem at ``temperature``, verify them all, and tabulate pass@k."""
    t0 = time.perf_counter()
    items = [first_turn(p, fmt, tokenizer) for p in problems]
    params = SamplingConfig(n=n, temperature=temperature, top_p=top_p, max_tokens=max_tokens, stop=fmt.stop, seed=seed)
    groups, _ = sample_and_verify(
        generator, items, params, fmt, verifier, chunk_prompts=chunk_prompts, on_chunk=on_chunk
    )
    results = []
    for g in groups:
        valid = {_normalise(p) for p, v in zip(g.proofs, g.verdicts, strict=True) if v.valid and p}
        results.append(ProblemResult(g.item.problem.name, g.correct, [v.status.value for v in g.verdicts], len(valid)))
    if samples_path is not None:
        with open(samples_path, "w") as f:
            for g in groups:
                for c, p, v in zip(g.completions, g.proofs, g.verdicts, strict=True):
                    f.write(
                        json.dumps(
                            {
                                "name": g.item.problem.name,
                                "completion": c.text,
                                "proof": p,
                                "status": v.status.value,
                                "reasons": list(v.reasons),
                            }
                        )
                        + "\n"
                    )
    return EvalResult(label, results, tuple(k for k in ks if k <= n), time.perf_counter() - t0, groups)


def sequence_logps(model: Any, tokenizer: Any, groups: Sequence[Group], *, micro_batch: int = 16) -> torch.Tensor:
    """Sum of token log-probs of every sample under ``model``: ``(P, G)`` (the paper's analysis uses the sum)."""
    prompts, responses = [], []
    for g, ids in zip(groups, encode_prompts(tokenizer, [g.item.prompt for g in groups]), strict=True):
        for c in g.completions:
            prompts.append(ids)
            responses.append(c.token_ids)
    with torch.no_grad():
        lp, mask = response_logprobs(model, prompts, responses, pad_id=tokenizer.pad_token_id, micro_batch=micro_batch)
    seq = sequence_logprob(lp, mask, reduction="sum")
    return seq.reshape(len(groups), -1)


def uplift_between(init_model: Any, new_model: Any, tokenizer: Any, groups: Sequence[Group]) -> UpliftRate:
    """Uplift rate of ``new_model`` over ``init_model`` on samples drawn from ``init_model`` (``groups``)."""
    correct = torch.tensor([g.correct for g in groups], dtype=torch.bool)
    return uplift_rate(
        sequence_logps(init_model, tokenizer, groups), sequence_logps(new_model, tokenizer, groups), correct
    )


# -------------------------------------------------------------------------------------------- reporting


@contextlib.contextmanager
def figure(path: Path, xlabel: str, ylabel: str, title: str = "") -> Iterator[Any]:
    """One set of axes to draw on; labelled, gridded, given a legend and saved as a PNG at ``path`` on exit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    try:
        yield ax
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if title:
            ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)


def plot_pass_at_k(results: Mapping[str, EvalResult], path: Path, title: str = "pass@k") -> Path:
    """pass@k curves (unbiased estimator; chunked std as error bars where available), log-2 k axis."""
    with figure(path, "k (samples)", "pass@k (%)", title) as ax:
        for label, res in results.items():
            tab = res.table()
            ks = sorted(tab)
            ys = [100 * tab[k]["unbiased"] for k in ks]
            err = [100 * tab[k].get("chunked_std", 0.0) for k in ks]
            ax.errorbar(ks, ys, yerr=err, marker="o", capsize=3, label=label)
        ax.set_xscale("log", base=2)
    return path


def plot_uplift(rates: Mapping[str, UpliftRate], path: Path) -> Path:
    with figure(path, "rank under the initial model (0 = most likely)", "uplift rate") as ax:
        for label, u in rates.items():
            ax.plot(range(len(u.rates)), u.rates, marker=".", label=label)
        ax.set_ylim(-0.05, 1.05)
    return path


def markdown_table(results: Mapping[str, EvalResult]) -> str:
    """One row per evaluated model: pass@k (unbiased, with chunked mean ± std), solved, unique valid proofs."""
    ks = sorted({k for r in results.values() for k in r.table()})
    head = "| model | " + " | ".join(f"pass@{k}" for k in ks) + " | solved | unique valid proofs |"
    rows = [head, "|" + "---|" * (len(ks) + 3)]
    for label, res in results.items():
        tab = res.table()
        cells = []
        for k in ks:
            if k not in tab:
                cells.append("–")
                continue
            v = tab[k]
            ch = f" ({100 * v['chunked']:.1f} ± {100 * v['chunked_std']:.1f})" if "chunked" in v else ""
            cells.append(f"{100 * v['unbiased']:.1f}{ch}")
        solved = sum(r.solved for r in res.results)
        uniq = sum(r.unique_valid for r in res.results)
        rows.append(f"| {label} | " + " | ".join(cells) + f" | {solved}/{len(res.results)} | {uniq} |")
    return "\n".join(rows)
