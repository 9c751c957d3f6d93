"""Value targets from an exported search tree (``trees/NAME.json``, :meth:`SearchTree.to_json`).

Values are reap's / AlphaProof's −(tactic steps still needed), 0 for a closed goal. For a node s:

    v(s) = 0                                          if s closes its goals
    v(s) = max_{e = s→t tactic edge, t solved} v(t) − 1   at a solved OR node (the shortest way to close)
    v(s) = min_{e = s→t focus edge} v(t)              at a solved AND node (focus edges cost 0: the hardest goal)

This is the AlphaProof pseudocode's ``compute_value_target`` (terminal 0, OR −1 + the child's, AND the min over
its children), which it computes only once the root is proved and only for the nodes of the proof. One
difference: at an OR node with several solved children the pseudocode follows the tactic its search marked
optimal, we take the shortest. **Unsolved nodes get no target**, as there (the pseudocode extracts no
transition from them); ``unsolved=True`` gives expanded unsolved nodes the far end of the value head's range,
−(B − 1) (B = 64 bins), "not closable within the search's reach", our extension, off by default.
Unexpanded leaves never get a target: nothing was learned about them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..provers.backend import state_text
from ..provers.base import ProofState, Theorem


@dataclass(frozen=True)
class NodeTarget:
    node: int
    state: str
    """the state text as the policy and value function saw it (:func:`proofrl.provers.backend.state_text`)"""
    value: float
    """−(steps to close), or −(B − 1) for an unsolved node (only with ``unsolved=True``)"""
    solved: bool


def node_state_text(node: dict[str, Any]) -> str:
    """The policy's text of an exported node (its goals and goal counts), exactly as search passed it."""
    c = node.get("counts", {})
    state = ProofState(
        Theorem("", ""),
        (),
        tuple(node.get("goals", [])),
        c.get("background", 0),
        c.get("shelved", 0),
        c.get("given_up", 0),
    )
    return state_text(state)


def _live(tree: dict[str, Any], node: dict[str, Any]) -> list[dict[str, Any]]:
    edges = tree["edges"]
    return [edges[e] for e in node["children"] if edges[e]["failure"] is None and edges[e]["dst"] is not None]


def steps_to_close(tree: dict[str, Any]) -> dict[int, int]:
    """Node id → tactic steps to close it, for every solved node (the formula in the module docstring)."""
    nodes = tree["nodes"]
    memo: dict[int, int | None] = {}

    def steps(nid: int, stack: frozenset[int]) -> int | None:
        if nid in memo:
            return memo[nid]
        n = nodes[nid]
        if n["closes"]:
            memo[nid] = 0
            return 0
        if not n["solved"] or nid in stack:
            return None
        inner = stack | {nid}
        kids = _live(tree, n)
        if n["kind"] == "AND":
            got = [steps(e["dst"], inner) for e in kids if e["kind"] == "focus"]
            known = [g for g in got if g is not None]
            out = max(known) if got and len(known) == len(got) else None  # min of values = max of steps
        else:
            costs = [s + (1 if e["kind"] == "tactic" else 0) for e in kids if (s := steps(e["dst"], inner)) is not None]
            out = min(costs) if costs else None
        memo[nid] = out
        return out

    return {n["id"]: s for n in nodes if (s := steps(n["id"], frozenset())) is not None}


def value_targets(tree: dict[str, Any], num_bins: int = 64, *, unsolved: bool = False) -> list[NodeTarget]:
    """A target for every solved node, and with ``unsolved`` for every expanded unsolved node (see the module
    docstring); nodes whose goals are closed are left out (search gives them 0 itself and never asks the value
    function)."""
    solved = steps_to_close(tree)
    out = []
    for n in tree["nodes"]:
        if n["closes"]:
            continue
        if n["id"] in solved:
            out.append(NodeTarget(n["id"], node_state_text(n), -float(solved[n["id"]]), True))
        elif unsolved and n["evaluations"] > 0:
            out.append(NodeTarget(n["id"], node_state_text(n), -float(num_bins - 1), False))
    return out


def solution_path(tree: dict[str, Any]) -> list[tuple[int, str]]:
    """``(node id, tactic)`` of every tactic edge in the tree's solving sub-tree (``solution``), root first."""
    edges = tree["edges"]
    return [(edges[e]["src"], edges[e]["tactic"]) for e in tree.get("solution", []) if edges[e]["kind"] == "tactic"]
