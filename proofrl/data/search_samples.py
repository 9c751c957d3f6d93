"""Search-and-learn's training samples: (state, tactic, value target) from an exported search tree after reap's
filters, and from the human-proof transitions the learner rehearses, in one unit (steps to close).

reap (blog, "RL stage"): "we run four rollout passes on one batch, filter samples by proof length and root-node
value, and use the selected trajectories to update both the policy and value heads. We still rehearse the
mathlib4 data in each RL step to avoid catastrophic forgetting." The blog gives no thresholds; ours are the
recipe's ``replay.max_proof_steps`` and ``replay.root_value_{min,max}`` (off by default but the length).
The targets come from :mod:`.value_targets`; the buffer the learner draws from is
:mod:`proofrl.train.replay_buffer`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Annotated, Any

from pydantic import Field

from ..schema import Config
from .value_targets import solution_path, steps_to_close, value_targets


@dataclass(frozen=True)
class ReplaySample:
    state: str
    tactic: str | None
    """the tactic taken at this state on the solution path; None: a value-only sample (off the path)"""
    cost: float
    """value target as steps to go: v = −cost (``value_targets``)"""
    theorem: str
    round: int
    source: str = "search"
    """``search`` (this loop's trees) or ``human`` (a rehearsed human-proof transition)"""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class ReplayConfig(Config):
    """Search-and-learn's ``replay:`` section: which exported trees give samples and which of their nodes give
    value targets, the buffer, and what each update draws from it."""

    max_proof_steps: Annotated[int, Field(ge=1)] = 16
    """drop solutions longer than this many tactic steps (reap filters by proof length)"""
    root_value_min: float | None = None
    root_value_max: float | None = None
    """keep a search only when its root's mean search value lies in [min, max] (reap filters by root value):
    a max drops theorems the model already finds easy, a min drops lucky proofs of states it judged hopeless"""
    off_path_values: bool = True
    """also keep value-only samples for the tree's other solved nodes (−steps; the pseudocode keeps only the
    proof's own)"""
    unsolved_values: bool = False
    """also give expanded unsolved nodes the value target −(B−1) (ours; the AlphaProof pseudocode gives them none)"""

    capacity: Annotated[int, Field(ge=1)] = 20000
    """search samples the buffer keeps (the oldest dropped first)"""
    rehearsal_fraction: Annotated[float, Field(ge=0, lt=1)] = 0.5
    """share of every update made of human-proof transitions (reap rehearses mathlib to avoid forgetting)"""
    max_samples: Annotated[int, Field(ge=1)] = 2000
    """search samples drawn from the buffer per update at most"""

    def why_dropped(self, tree: dict[str, Any]) -> str | None:
        """Why a tree gives no samples (``unsolved``, ``too long``, ``root value``), or None to keep it."""
        if not tree.get("solution"):
            return "unsolved"
        steps = steps_to_close(tree).get(tree["root"])
        if steps is None or steps > self.max_proof_steps:
            return "too long"
        root = tree["nodes"][tree["root"]]
        v = root.get("value")
        if v is not None and (
            (self.root_value_min is not None and v < self.root_value_min)
            or (self.root_value_max is not None and v > self.root_value_max)
        ):
            return "root value"
        return None


def samples_from_tree(tree: dict[str, Any], round_: int, filt: ReplayConfig, num_bins: int = 64) -> list[ReplaySample]:
    """The replay samples of one exported tree after the filters: one (state, tactic, −steps) per tactic of
    the solution, plus value-only samples of the other expanded nodes when ``off_path_values``."""
    if filt.why_dropped(tree) is not None:
        return []
    name = tree.get("search", {}).get("name", "")
    targets = {t.node: t for t in value_targets(tree, num_bins, unsolved=filt.unsolved_values)}
    out, on_path = [], set()
    for nid, tactic in solution_path(tree):
        t = targets[nid]
        out.append(ReplaySample(t.state, tactic, -t.value, name, round_))
        on_path.add(nid)
    if filt.off_path_values:
        out += [ReplaySample(t.state, None, -t.value, name, round_) for t in targets.values() if t.node not in on_path]
    return out


def human_samples(transitions: Sequence[dict[str, Any]], *, max_state_chars: int = 2000) -> list[ReplaySample]:
    """Human-proof transitions as rehearsal samples: the tactic, and as value target the steps to close the
    state in the unit of the search's targets (:func:`human_steps_to_close`: the critical path, the hardest goal
    counted at a split, not every tactic left). Bullets and braces are skipped; so are states whose goals the
    recorded proof never closes (a proof whose stepping failed midway)."""
    proofs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in transitions:
        proofs[f"{t.get('module', '')}.{t['theorem']}"].append(t)
    out = []
    for name, ts in proofs.items():
        ts = sorted(ts, key=lambda t: t["step"])
        costs = human_steps_to_close(ts)
        out += [
            ReplaySample(t["state_before"], t["tactic"].strip(), float(c), name, -1, "human")
            for t, c in zip(ts, costs, strict=True)
            if c is not None
            and not t.get("structural")
            and t["tactic"].strip()
            and len(t["state_before"]) <= max_state_chars
        ]
    return out


def _hidden_goals(state: str) -> int:
    """Goals a state text counts but does not show: its last line ``(+ N unfocused, M shelved…)``."""
    m = re.search(r"\(\+ (\d+) unfocused, (\d+) shelved", state.rsplit("\n", 1)[-1])
    return int(m[1]) + int(m[2]) if m else 0


def human_steps_to_close(proof: Sequence[dict[str, Any]]) -> list[int | None]:
    """Steps to close each ``state_before`` of one human proof (its transitions in order), in the unit of
    :func:`~.value_targets.steps_to_close`: a goal costs 1 (the tactic applied to it) + the hardest of the goals
    that tactic leaves; a state costs its hardest foreground goal (the AND node's rule).

    The goal tree is rebuilt from the goal counts: a tactic acts on the first open goal (Coq's and Lean's
    default goal selector) and replaces it by ``goals_after − goals_before + 1`` goals; a tactic that closes
    several goals at once (``all: lia``) closes that many from the front. Bullets and braces change no count.
    ``None`` where a goal of the state is never closed in the recorded proof."""
    children: dict[int, list[int]] = {}
    stack: list[int] = []
    fresh = iter(range(1 << 62))
    foreground: list[list[int]] = []
    for t in proof:
        before, after = int(t["goals_before"]), int(t["goals_after"])
        if len(stack) != before:  # the first state, or counts this model cannot follow: start from the record
            stack = [next(fresh) for _ in range(before)]
        foreground.append(stack[: max(0, before - _hidden_goals(t["state_before"]))])
        if t.get("structural") or not stack:
            continue
        new = [next(fresh) for _ in range(max(0, after - before + 1))]
        children[stack[0]] = new
        for closed in stack[1 : 1 + max(0, before - after - 1)]:
            children[closed] = []
        stack = new + stack[max(1, before - after) :]
    memo: dict[int, int | None] = {}

    def cost(goal: int) -> int | None:
        if goal not in memo:
            kids = children.get(goal)
            sub = None if kids is None else [cost(k) for k in kids]
            known = [c for c in sub or [] if c is not None]
            memo[goal] = None if sub is None or len(known) < len(sub) else 1 + max(known, default=0)
        return memo[goal]

    out: list[int | None] = []
    for goals in foreground:
        costs = [cost(g) for g in goals]
        out.append(None if not costs or None in costs else max(costs))  # type: ignore[type-var]
    return out
