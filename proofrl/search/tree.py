"""The search tree shared by best-first search and AND-OR MCTS.

* **Nodes** hold a prover state (:class:`~proofrl.provers.base.ProofState`: goals, counts, fingerprint, the
  tactic path that re-reaches it). An OR node is solved when any child is; an AND node (reap's
  ``childKindAfterTactic``: several goals, none mentioning an existential variable) when every focused child is.
* **Edges** are tactics (cost 1) or focus edges (``i: {`` in Coq, cost 0) from an AND node to one goal.
  A failed tactic stays in the tree as an edge without a child and with its structured failure
  (``parse_error``, ``forbidden``, ``error`` + message, ``kernel``, ``timeout``, ``crash``) — unlike reap, which drops
  them.
* **Merging.** States are merged by fingerprint (a DAG, as ReProver / BFS-Prover's global state table); an
  edge back to its own node (a self-loop) or to an ancestor (a cycle, reap's rule) is dropped and listed in
  ``dropped``; a repeated tactic string, or a second tactic reaching the same child, adds its prior to the
  existing edge (reap). States whose goals are closed are never merged: "no goals" says nothing of how they
  were closed, and each closing path is judged on its own.
* **Unsound leaves.** A solved tree's proof is replayed by the final check in a fresh process; when that
  refuses it, the closing leaves of the proof are marked ``unsound`` (with the verdict as reason): dead, never
  solved, kept in the export, and the search goes on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from ..provers.backend import get_backend
from ..provers.base import ProofState, StepFailure, Theorem

Kind = Literal["OR", "AND"]


def normalize_tactic(tactic: str, backend: str = "coq") -> str:
    """Whitespace collapsed (so ``intros  n.`` and ``intros n.`` merge); a Coq tactic gets its final period
    (:meth:`~proofrl.provers.backend.Backend.normalize_tactic`)."""
    return get_backend(backend).normalize_tactic(tactic)


def refusal(tactic: str, backend: str = "coq") -> str | None:
    """Why the search refuses a proposed tactic before the prover sees it, or None: what the backend's step
    refuses itself, asked without a prover call, and the bullets, braces and focus steps the search writes
    itself (:meth:`~proofrl.provers.backend.Backend.refusal`)."""
    return get_backend(backend).refusal(tactic)


def goals_gone(state: ProofState, focus_depth: int) -> bool:
    """No goal left to prove at this point: none focused, shelved or given up, and none in the background
    unless a focus block is open (then the focused goal is what was owed)."""
    return not state.goals and not state.shelved and not state.given_up and (focus_depth > 0 or state.background == 0)


@dataclass
class Failure:
    kind: str  # a FailureKind value
    message: str = ""

    @classmethod
    def of(cls, f: StepFailure) -> Failure:
        return cls(f.kind.value, f.message)

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}


@dataclass
class Node:
    id: int
    state: ProofState
    kind: Kind = "OR"
    focus_depth: int = 0
    """how many focus blocks enclose the node's goals (0 at top level)"""
    depth: int = 0
    """tactic edges from the root on the path that created the node"""
    parents: list[int] = field(default_factory=list)  # edge ids into the node
    children: list[int] = field(default_factory=list)  # edge ids out of the node (failed ones too)
    visits: int = 0
    value_sum: float = 0.0
    evaluations: int = 0
    """expansions of the node (progressive sampling compares it with c · N^α)"""
    estimate: float | None = None
    """the leaf value given when the node was first evaluated"""
    priority: float | None = None  # best-first
    logprob: float = 0.0  # best-first: Σ tactic log-prob along the creating path
    solved: bool = False
    dead: bool = False
    """expanded and no way forward (every child failed or dead; for AND: some child dead), or unsound"""
    unsound: str = ""
    """why the final check refused a proof that closed here (a closing leaf that is dead for good)"""

    @property
    def goals_gone(self) -> bool:
        """The state's goals are all gone (inside a focus block: the focused goal is)."""
        return goals_gone(self.state, self.focus_depth)

    @property
    def closes(self) -> bool:
        """The goals are gone and no final check refused a proof through here. Necessary for a proof, never
        sufficient: only the final check in a fresh process makes a search ``proved``."""
        return self.goals_gone and not self.unsound

    @property
    def expanded(self) -> bool:
        return self.evaluations > 0

    @property
    def mean_value(self) -> float:
        return self.value_sum / self.visits if self.visits else 0.0


@dataclass
class Edge:
    id: int
    src: int
    tactic: str
    kind: Literal["tactic", "focus"] = "tactic"
    dst: int | None = None
    logprob_sum: float = 0.0
    logprob_mean: float = 0.0
    prior_raw: float = 0.0
    """exp(Σ token log-prob / τ), summed over merged proposals (reap)"""
    aliases: list[str] = field(default_factory=list)
    """other tactic strings that reached the same child (their priors were added)"""
    focus_index: int | None = None  # 1-based goal number of a focus edge
    visits: int = 0
    value_sum: float = 0.0
    failure: Failure | None = None
    seconds: float = 0.0
    source: str = ""
    """which policy source proposed the tactic (``knn``, ``hf``, ``auto``; ``knn+hf`` when both did)"""

    @property
    def cost(self) -> float:
        return 0.0 if self.kind == "focus" else 1.0

    @property
    def ok(self) -> bool:
        return self.failure is None and self.dst is not None


class SearchTree:
    def __init__(self, theorem: Theorem, root: ProofState, *, decompose: bool = True, backend: str = "coq"):
        self.theorem = theorem
        self.backend = backend
        self.lang = get_backend(backend)
        self.decompose = decompose
        """AND nodes for independent goals (MCTS; Coq: focus blocks ``i: {``, Lean: ``focus_goal i`` views,
        :mod:`proofrl.provers.lean.goals`); best-first keeps the whole goal list in one node"""
        self.nodes: list[Node] = []
        self.edges: list[Edge] = []
        self.dropped: list[dict[str, Any]] = []
        self._by_fp: dict[str, int] = {}
        self.root = self._new_node(root, 0, 0)

    # -- construction ---------------------------------------------------------------------------------
    def kind_for(self, state: ProofState) -> Kind:
        """reap's rule: AND only when the tactic left several goals and none mentions an existential variable."""
        return "AND" if self.decompose and self.lang.decomposable(state) else "OR"

    def _new_node(self, state: ProofState, focus_depth: int, depth: int) -> Node:
        node = Node(len(self.nodes), state, self.kind_for(state), focus_depth, depth)
        self.nodes.append(node)
        self._by_fp[state.fingerprint] = node.id
        if node.closes:
            node.solved = True
        return node

    def edge_for(self, src: Node, tactic: str) -> Edge | None:
        """The existing edge of ``src`` with this tactic string (or alias), if any."""
        for eid in src.children:
            e = self.edges[eid]
            if e.tactic == tactic or tactic in e.aliases:
                return e
        return None

    def add_failed(
        self,
        src: Node,
        tactic: str,
        failure: Failure,
        *,
        logprob_sum: float = 0.0,
        logprob_mean: float = 0.0,
        prior: float = 0.0,
        seconds: float = 0.0,
        source: str = "",
    ) -> Edge:
        e = Edge(
            len(self.edges),
            src.id,
            tactic,
            logprob_sum=logprob_sum,
            logprob_mean=logprob_mean,
            prior_raw=prior,
            failure=failure,
            seconds=seconds,
            source=source,
        )
        self.edges.append(e)
        src.children.append(e.id)
        return e

    def add_child(
        self,
        src: Node,
        tactic: str,
        state: ProofState,
        *,
        kind: Literal["tactic", "focus"] = "tactic",
        logprob_sum: float = 0.0,
        logprob_mean: float = 0.0,
        prior: float = 0.0,
        seconds: float = 0.0,
        focus_index: int | None = None,
        source: str = "",
    ) -> Edge | None:
        """The edge ``src --tactic--> node(state)``, merging as the module says; None when dropped."""
        depth = src.depth + (kind == "tactic")
        focus = src.focus_depth + (kind == "focus")
        # closing leaves are never merged (module docstring)
        existing = None if goals_gone(state, focus) else self._by_fp.get(state.fingerprint)
        if existing == src.id:
            self.dropped.append({"src": src.id, "tactic": tactic, "reason": "self-loop", "dst": src.id})
            return None
        if existing is not None and existing in self.ancestors(src.id):
            self.dropped.append({"src": src.id, "tactic": tactic, "reason": "cycle", "dst": existing})
            return None
        if existing is not None and kind == "tactic":  # (two equal goals of an AND node keep two focus edges)
            for eid in src.children:  # a sibling already reaches that node: add the prior (reap)
                e = self.edges[eid]
                if e.dst == existing:
                    e.prior_raw += prior
                    if tactic != e.tactic and tactic not in e.aliases:
                        e.aliases.append(tactic)
                    return e
        dst = self.nodes[existing] if existing is not None else self._new_node(state, focus, depth)
        e = Edge(
            len(self.edges),
            src.id,
            tactic,
            kind,
            dst.id,
            logprob_sum,
            logprob_mean,
            prior,
            focus_index=focus_index,
            seconds=seconds,
            source=source,
        )
        self.edges.append(e)
        src.children.append(e.id)
        dst.parents.append(e.id)
        return e

    def ancestors(self, node_id: int) -> set[int]:
        seen: set[int] = set()
        todo = [node_id]
        while todo:
            n = todo.pop()
            for eid in self.nodes[n].parents:
                p = self.edges[eid].src
                if p not in seen:
                    seen.add(p)
                    todo.append(p)
        return seen

    def live_children(self, node: Node) -> list[Edge]:
        return [self.edges[e] for e in node.children if self.edges[e].ok]

    # -- solved / dead status ---------------------------------------------------------------------------
    def refresh(self, node: Node) -> None:
        """Recompute ``node``'s solved and dead flags from its children and pass changes up to its parents."""
        todo = [node.id]
        while todo:
            n = self.nodes[todo.pop()]
            kids = [self.nodes[e.dst] for e in self.live_children(n)]  # type: ignore[index]
            if n.unsound:
                solved, dead = False, True
            elif n.closes:
                solved, dead = True, False
            elif n.kind == "AND":  # one focus edge per goal, each solved (a failed focus makes the node dead)
                want = len(n.state.goals)
                solved = n.expanded and len(kids) == want and all(k.solved for k in kids)
                dead = n.expanded and (len(kids) < want or any(k.dead for k in kids))
            else:
                solved = any(k.solved for k in kids)
                dead = n.expanded and not solved and all(k.dead for k in kids)
            if (solved, dead) != (n.solved, n.dead):
                n.solved, n.dead = solved, dead
                todo.extend(self.edges[e].src for e in n.parents)

    def mark_unsound(self, reason: str) -> list[int]:
        """The final check refused the current solution: its closing leaves become unsound (dead, with
        ``reason``) and the solved/dead flags are recomputed up to the root. Returns the leaves' ids.

        The check judges the whole proof, so when the solution closes several focused goals the culprit is
        not known and every closing leaf of it is marked (an honest sibling among them is lost with it)."""
        leaves = [e.dst for e in (self.edges[i] for i in self.solution()) if self.nodes[e.dst].closes]  # type: ignore[index]
        for nid in leaves:
            self.nodes[nid].unsound = reason  # type: ignore[index]
            self.refresh(self.nodes[nid])  # type: ignore[index]
        return leaves  # type: ignore[return-value]

    # -- the proof ------------------------------------------------------------------------------------
    def solution(self) -> list[int]:
        """Edge ids of a solving sub-tree: the shortest solved choice at OR nodes, every child at AND nodes."""
        memo: dict[int, tuple[int, list[int]]] = {}

        def best(nid: int) -> tuple[int, list[int]]:
            if nid in memo:
                return memo[nid]
            n = self.nodes[nid]
            memo[nid] = (10**9, [])  # guards against revisits while computing (the graph is acyclic anyway)
            if n.closes:
                memo[nid] = (0, [])
            elif n.kind == "AND":
                total, used = 0, list[int]()
                for e in sorted(self.live_children(n), key=lambda e: e.focus_index or 0):
                    k, sub = best(e.dst)  # type: ignore[arg-type]
                    total, used = total + k + 2, [*used, e.id, *sub]
                memo[nid] = (total, used) if n.solved else (10**9, [])
            else:
                options = [(best(e.dst)[0] + 1, e) for e in self.live_children(n) if self.nodes[e.dst].solved]  # type: ignore[index, arg-type]
                if options:
                    k, e = min(options, key=lambda o: (o[0], o[1].id))
                    memo[nid] = (k, [e.id] + best(e.dst)[1])  # type: ignore[arg-type]
            return memo[nid]

        return best(self.root.id)[1] if self.root.solved else []

    def script(self) -> list[str]:
        """The solved tree as proof sentences: the chosen tactic at OR nodes, an AND node's children in goal order
        as the backend writes them (Coq: ``{ ... }`` blocks, each focusing the first remaining goal, which is the
        next child's; Lean: ``·`` bullets)."""
        chosen = set(self.solution())
        out: list[str] = []

        def emit(nid: int) -> None:
            n = self.nodes[nid]
            if n.closes:
                return
            kids = sorted(
                (e for e in self.live_children(n) if e.id in chosen), key=lambda e: (e.focus_index or 0, e.id)
            )
            if n.kind == "AND":  # each goal's lines, in goal order, as the backend writes them (Coq `{ }`, Lean `·`)
                blocks = []
                for e in kids:
                    mark = len(out)
                    emit(e.dst)  # type: ignore[arg-type]
                    blocks.append(out[mark:])
                    del out[mark:]
                out.extend(self.lang.and_node_lines(blocks))
            else:
                out.append(kids[0].tactic)
                emit(kids[0].dst)  # type: ignore[arg-type]

        if self.root.solved:
            emit(self.root.id)
        return out

    # -- export ---------------------------------------------------------------------------------------
    def to_json(self, scores: dict[int, dict[str, float]] | None = None) -> dict[str, Any]:
        """Every node and edge (failed ones with their failure); ``scores``: per edge ``{c, Q, U, score, prior}``."""
        scores = scores or {}

        def fin(x: float | None) -> float | None:
            return None if x is None or not math.isfinite(x) else x

        nodes = [
            {
                "id": n.id,
                "kind": n.kind,
                "focus_depth": n.focus_depth,
                "depth": n.depth,
                "goals": [str(g) for g in n.state.goals],
                "fingerprint": n.state.fingerprint,
                "counts": {
                    "foreground": n.state.foreground,
                    "background": n.state.background,
                    "shelved": n.state.shelved,
                    "given_up": n.state.given_up,
                },
                "tactics": list(n.state.tactics),
                "visits": n.visits,
                "value_sum": n.value_sum,
                "value": n.mean_value if n.visits else None,
                "estimate": fin(n.estimate),
                "evaluations": n.evaluations,
                "priority": fin(n.priority),
                "solved": n.solved,
                "closes": n.closes,
                "dead": n.dead,
                "unsound": n.unsound or None,
                "parents": list(n.parents),
                "children": list(n.children),
            }
            for n in self.nodes
        ]
        edges = []
        for e in self.edges:
            d = {
                "id": e.id,
                "src": e.src,
                "dst": e.dst,
                "kind": e.kind,
                "tactic": e.tactic,
                "aliases": list(e.aliases),
                "logprob_sum": e.logprob_sum,
                "logprob_mean": e.logprob_mean,
                "prior_raw": e.prior_raw,
                "focus_index": e.focus_index,
                "visits": e.visits,
                "value_sum": e.value_sum,
                "value": e.value_sum / e.visits if e.visits else None,
                "seconds": e.seconds,
                "failure": e.failure.to_json() if e.failure else None,
                "source": e.source,
            }
            d.update({k: fin(v) for k, v in scores.get(e.id, {}).items()})
            edges.append(d)
        return {
            "root": self.root.id,
            "nodes": nodes,
            "edges": edges,
            "dropped": list(self.dropped),
            "solution": self.solution(),
        }
