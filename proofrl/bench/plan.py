"""A bench plan: every claim's size, the seeds and the time budget, written down before the runs it governs.

``proofrl bench --plan docs/claims-plan.yaml`` reads a YAML file of this shape::

    seeds: [10, 11, 12, 13, 14]     # the seeds every planned claim runs
    budget_hours: 4.0               # wall hours on the bench's 2-core machine, the whole plan
    claims:
      reap-mcts-vs-best-first:
        size: 267                   # theorems (or states) per seed; null: not run
        arms: [best-first, mcts]    # baseline, treatment: as the claim names them
        hours: 0.6                  # the estimate the budget adds up
        pool: the held-out core modules' lemmas
        why: how the size was chosen, or why the claim is not run

Every registered claim must be in the plan (run or not, with its reason), so a plan says what happens to each;
a planned claim names its arms as the registry does; the planned claims' hours must fit the budget. A bad plan
is one line naming what to fix.

An index of plans (``docs/claims-plans.yaml``) lists plan files in the order they were written, so that one
command reruns every plan and reads each claim's latest verdict from them::

    plans: [claims-plan.yaml, claims-plan-2.yaml, claims-pilot-3.yaml, claims-plan-3.yaml]   # relative to the index
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from ..errors import ConfigError
from ..schema import Config, read_mapping, validate


class ClaimPlanConfig(Config):
    size: Annotated[int, Field(ge=1)] | None
    """theorems (or states) per seed; ``None``: the claim is not run, ``why`` says why"""
    arms: tuple[str, ...] = ()
    """baseline and treatment, as the registry names them (checked: an arm renamed after the plan is refused)"""
    hours: Annotated[float, Field(ge=0)] = 0.0
    pool: str = ""
    why: str


class BenchPlanConfig(Config):
    seeds: Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)]
    budget_hours: Annotated[float, Field(gt=0)]
    claims: dict[str, ClaimPlanConfig]

    @property
    def planned(self) -> dict[str, int]:
        """The claims that run, with their sizes."""
        return {name: c.size for name, c in self.claims.items() if c.size is not None}


def load_plan(path: Path, registered: dict[str, tuple[str, str]]) -> BenchPlanConfig:
    """The plan in ``path``, checked against the ``registered`` claims (name → arms; :class:`ConfigError`, one
    line)."""
    if not Path(path).is_file():
        raise ConfigError(f"{path}: no such plan file")
    try:
        plan = validate(BenchPlanConfig, read_mapping(Path(path), "a bench plan"))
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}" if not str(e).startswith(str(path)) else str(e)) from None
    if unknown := [n for n in plan.claims if n not in registered]:
        raise ConfigError(f"{path}: {unknown[0]!r} is not a claim; valid: {', '.join(registered)}")
    if missing := [n for n in registered if n not in plan.claims]:
        raise ConfigError(f"{path}: the plan says nothing of {', '.join(missing)} (give each a size, or size: null)")
    for name, c in plan.claims.items():
        if c.size is not None and tuple(c.arms) != tuple(registered[name]):
            raise ConfigError(f"{path}: {name}'s arms are {list(registered[name])}, the plan says {c.arms}")
    if len(set(plan.seeds)) != len(plan.seeds):
        raise ConfigError(f"{path}: seeds repeat: {plan.seeds}")
    hours = sum(c.hours for c in plan.claims.values() if c.size is not None)
    if hours > plan.budget_hours:
        raise ConfigError(f"{path}: the planned claims take {hours:g} hours, over the budget of {plan.budget_hours:g}")
    return plan


def load_plans(path: Path, registered: dict[str, tuple[str, str]]) -> tuple[bool, list[tuple[str, BenchPlanConfig]]]:
    """``(is_index, [(name, plan), ...])``: the plan in ``path`` (one, named by its file), or every plan an index
    lists (``plans:``), each checked by :func:`load_plan`. An index's plans are named by their file stems, which must
    differ (each runs into its own folder)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such plan file")
    tree: dict[str, Any] = read_mapping(path, "a bench plan")
    if "plans" not in tree:
        return False, [(path.stem, load_plan(path, registered))]
    entries = tree["plans"]
    if set(tree) != {"plans"} or not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path}: an index of plans has one key, plans: a list of plan files")
    if not all(isinstance(e, str) for e in entries):
        raise ConfigError(f"{path}: plans: each entry is a plan file's path (relative to the index)")
    files = [path.parent / e for e in entries]
    if len({f.stem for f in files}) != len(files):
        raise ConfigError(f"{path}: plans: two files share a name ({', '.join(entries)}); each runs into OUT/NAME")
    return True, [(f.stem, load_plan(f, registered)) for f in files]
