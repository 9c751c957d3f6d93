"""One claim of a paper as a named, paired experiment (:class:`Claim`) and what its run gets (:class:`ClaimRun`).

A :class:`Claim` names its paper, quotes what the source reports, and says which arm the paper expects to
be better (``treatment`` against ``baseline``, ``direction`` +1 when higher is better for the metric). Its
``run`` takes one :class:`ClaimRun` (a seed, a size, a folder) and measures *every* arm on the *same*
theorems under that seed, returning ``{arm: {theorem: value}}``; :mod:`proofrl.bench.run` repeats it over
seeds and :mod:`proofrl.bench.stats` compares the arms pairwise.

A claim whose ``run`` is ``None`` is listed (paper, source, arms) but not yet measured; the report says so.

Sizes are fixed per claim before any result is seen (:attr:`Claim.size`, theorems per seed) and chosen from
measured costs so that a claim's default seeds fit its time budget on 2 CPU cores; ``smoke_size`` is what the
CI test runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NOT_QUOTED = "not quoted yet (the claim is not measured yet)"

Results = dict[str, dict[str, float]]
"""arm → theorem (or state) name → the metric's value"""


@dataclass
class ClaimRun:
    """What a claim's run gets: the seed, theorems (or states) per seed, its own folder, the Coq processes, the
    shared tactic assets (:func:`proofrl.data.assets.tactic_assets`) and the console."""

    seed: int
    size: int
    out: Path
    workers: int
    assets: Any
    console: Any = None
    smoke: bool = False

    @property
    def smoke_suffix(self) -> str:
        """``-smoke`` at smoke size: a smoke run never reads a full run's cache, nor the other way round."""
        return "-smoke" if self.smoke else ""

    @property
    def seed_key(self) -> str:
        """``seed-S-size-N`` (``-smoke``): what a run shared by several claims is kept under, per seed and size."""
        return f"seed-{self.seed}-size-{self.size}{self.smoke_suffix}"

    def say(self, line: str) -> None:
        """``line`` on the bench's console as written (no markup), not wrapped; nothing without a console."""
        if self.console is not None:
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def shared_dir(self, name: str) -> Path:
        """``OUT/NAME-shared``: where one run per seed that serves several claims is kept (a claim's own folder is
        ``OUT/CLAIM/seed-S``), so the second claim reads the first one's run."""
        return self.out.parent.parent / f"{name}-shared"


@dataclass(frozen=True)
class Claim:
    name: str
    paper: str
    statement: str
    """the claim in one sentence, as the paper makes it"""
    source: str
    """what the source itself reports (quoted or paraphrased with its numbers)"""
    metric: str
    """what one value is (per theorem or state)"""
    baseline: str
    treatment: str
    direction: int = 1
    """+1: the claim is treatment > baseline on the metric; −1: treatment < baseline"""
    margin: float = 0.0
    """δ > 0 makes it a non-inferiority claim, direction·(treatment − baseline) > −δ ("does not lower the metric
    by δ or more"), fixed before any result; 0: the ordinary claim"""
    run: Callable[[ClaimRun], Results] | None = None
    size: int = 0
    """theorems (or states) per seed at the bench's size"""
    smoke_size: int = 2
    unit: str = "theorems"
    """what one value is measured on (theorems, states)"""
    settings: dict[str, Any] = field(default_factory=dict)
    """the arms' fixed settings (budgets, widths), shown in the report"""

    @property
    def implemented(self) -> bool:
        return self.run is not None

    @property
    def arms(self) -> tuple[str, str]:
        return self.baseline, self.treatment
