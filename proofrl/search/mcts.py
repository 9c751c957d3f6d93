"""AND-OR Monte-Carlo tree search as reap (frenzymath/reap, ``Reap/Tactic/TreeSearch.lean``), a close port of
the AlphaProof pseudocode. Defaults (``Reap/Options.lean``, see :class:`~proofrl.search.config.SearchConfig`):
6 tactics per expansion, c_base 3200, c_init 0.001, γ 0.99, prior temperature τ 50, progressive sampling
c 0.01 and α 0.6, at most 64 nodes and 64 steps, 200 s a tactic.

**Selection** (``computePUCTScores``) at a node with N visits: c = c_init + ln((N + c_base + 1) / c_base);
each edge's prior p = prior / Σ priors of the node's edges (renormalised: later sampling adds edges), with
prior = exp(Σ token log-prob / τ); U = c · p · √N / (n_edge + 1). At an OR node Q = γ^(−1 − v̄_edge) for a
visited edge (v̄_edge: the mean of v_child − cost over its visits, ≈ −steps to go), 0 otherwise. At an AND
node Q = −∞ for a solved child and 1 − γ^(−1 − v̄_edge) otherwise, so search goes to the hardest open goal.
The edge with the largest Q + U is followed.

**Expansion.** A leaf OR node is expanded once (one policy call, ``width`` tactics); an expanded OR
node is expanded again when its evaluations ≤ c · N^α (progressive sampling: with the defaults, not before
N ≈ 2154 visits, so with 64 steps never). A tactic that leaves several goals, none mentioning an existential
variable, makes an AND node whose goals become focused OR children (``i: {``, prior 1/#goals, cost 0).

**Backup** (``reapMCTSStep``): the leaf's value v (0 when its goals are closed; else the value model's) goes
up as v' = v − cost(edge), added to each edge's and node's sums; an OR node passes v' on, an AND node the min
over its unsolved visited children's mean values starting from 1.0 (0 once it is solved). An OR node is
solved when a child is, an AND node when all are; the loop stops when the root is solved, when the tree has
more than ``max_nodes`` nodes (checked before each step, so it may overshoot, as reap's), after
``max_steps`` steps, or when its seconds are spent.
"""

from __future__ import annotations

import math

from .engine import Search
from .policy import Proposal
from .tree import Edge, Node


class MCTS(Search):
    algorithm = "mcts"
    decompose = True

    @property
    def seconds_budget(self) -> float | None:
        return self.config.seconds

    def prior(self, p: Proposal) -> float:
        return math.exp(p.logprob_sum / self.config.prior_temperature)

    # -- PUCT -----------------------------------------------------------------------------------------
    def edge_scores(self, node: Node) -> dict[int, dict[str, float]]:
        """``{edge id: {c, p, Q, U, score}}`` for ``node``'s live edges (reap's ``computePUCTScores``)."""
        cfg, tree = self.config, self.tree
        assert tree is not None
        edges = tree.live_children(node)
        n = node.visits
        c = cfg.c_init + math.log((n + cfg.c_base + 1) / cfg.c_base)
        total = sum(e.prior_raw for e in edges)
        out: dict[int, dict[str, float]] = {}
        for e in edges:
            p = e.prior_raw / total if total > 0 else 1.0 / len(edges)
            u = c * p * math.sqrt(n) / (e.visits + 1)
            vs = cfg.discount ** (-1.0 - e.value_sum / e.visits) if e.visits else 0.0
            q = vs
            if node.kind == "AND":
                q = -math.inf if tree.nodes[e.dst].solved else 1.0 - vs  # type: ignore[index]
            out[e.id] = {"c": c, "prior": p, "Q": q, "U": u, "score": q + u}
        return out

    def scores(self) -> dict[int, dict[str, float]]:
        assert self.tree is not None
        out: dict[int, dict[str, float]] = {}
        for n in self.tree.nodes:
            out.update(self.edge_scores(n))
        return out

    def wants_expansion(self, node: Node) -> bool:
        cfg = self.config
        if node.kind == "AND":
            return not node.expanded
        return (
            not node.expanded
            or node.evaluations <= cfg.progressive_sampling_c * node.visits**cfg.progressive_sampling_alpha
        )

    def select(self) -> tuple[list[Edge], Node]:
        tree = self.tree
        assert tree is not None
        node, path = tree.root, []
        while not (node.solved or node.dead or self.wants_expansion(node)):
            scores = self.edge_scores(node)
            live = [e for e in tree.live_children(node) if not tree.nodes[e.dst].dead]  # type: ignore[index]
            if not live:
                break
            best = max(live, key=lambda e: (scores[e.id]["score"], scores[e.id]["prior"], -e.id))
            path.append(best)
            node = tree.nodes[best.dst]  # type: ignore[index]
        return path, node

    def backup(self, path: list[Edge], leaf: Node, v: float) -> None:
        tree = self.tree
        assert tree is not None
        leaf.visits += 1
        leaf.value_sum += v
        for e in reversed(path):
            parent = tree.nodes[e.src]
            v_up = v - e.cost
            e.visits += 1
            e.value_sum += v_up
            parent.visits += 1
            parent.value_sum += v_up
            if parent.kind == "AND":
                if parent.solved:
                    v = 0.0
                else:
                    open_ = [
                        x.value_sum / x.visits
                        for x in tree.live_children(parent)
                        if x.visits and not tree.nodes[x.dst].solved  # type: ignore[index]
                    ]
                    v = min([1.0, *open_])
            else:
                v = v_up

    # -- the loop ---------------------------------------------------------------------------------------
    def loop(self) -> None:
        cfg, tree = self.config, self.tree
        assert tree is not None
        root = tree.root
        while not (root.solved or root.dead):
            if len(tree.nodes) > cfg.max_nodes:
                self.stop_reason = f"node budget spent ({len(tree.nodes)} > {cfg.max_nodes})"
                return
            if cfg.max_steps is not None and self.iterations >= cfg.max_steps:
                self.stop_reason = f"step budget spent ({cfg.max_steps})"
                return
            if self.out_of_time():
                return
            with self.tracer.span("select", step=self.iterations) as info:
                path, leaf = self.select()
                info["depth"] = len(path)
                info["leaf"] = leaf.id
            if leaf.solved:
                v = 0.0
            elif leaf.dead:
                v = cfg.failed_value
            else:
                if leaf.kind == "AND":
                    self.decompose_node(leaf)
                else:
                    self.expand(leaf, cfg.width)
                v = self.leaf_value(leaf) if not leaf.dead else cfg.failed_value
            with self.tracer.span("backup", step=self.iterations):
                self.backup(path, leaf, v)
            self.iterations += 1
