"""Best-first proof search over whole goal lists (no AND decomposition), as ReProver / GPT-f and BFS-Prover.

The open node with the highest priority is expanded: the policy proposes ``width`` tactics, each runs in the
prover, and every new state joins the queue. Priorities (:class:`~proofrl.search.config.SearchConfig`):

* ``cum_logprob`` — Σ log-prob of the tactics on the node's path (lean-dojo/ReProver
  ``prover/proof_search.py``: 64 tactics per expansion, 600 s per theorem, no expansion limit);
* ``length_normalized`` — that sum / depth^α (BFS-Prover; BFS-Prover-V2 ``src/search/proof_tree.py`` uses each
  tactic's mean token log-prob and ``depth_reward`` α = 2.0, 4 tactics per expansion, 600 s, 18 s a tactic).

States are merged by fingerprint (ReProver's global state table); the search ends when the root is solved
(some path reaches a state with no goals), the queue is empty, or the expansion or seconds budget is spent;
a solved root whose proof the final check refuses sends it back to its queue (see :mod:`.engine`).
"""

from __future__ import annotations

import heapq
import math

from .engine import Search
from .policy import Proposal
from .tree import Node


class BestFirstSearch(Search):
    algorithm = "best-first"
    decompose = False
    queue: list[tuple[float, int]] | None = None
    """the open nodes by priority (negated, for heapq)"""

    @property
    def seconds_budget(self) -> float | None:
        return self.config.seconds

    def prior(self, p: Proposal) -> float:
        return math.exp(self.tactic_logprob(p.logprob_sum, p.logprob_mean))

    def tactic_logprob(self, logprob_sum: float, logprob_mean: float) -> float:
        return logprob_mean if self.config.logprob == "mean" else logprob_sum

    def priority(self, node: Node) -> float:
        cfg = self.config
        if cfg.priority == "length_normalized" and node.depth > 0:
            return node.logprob / node.depth**cfg.alpha
        return node.logprob

    def scores(self) -> dict[int, dict[str, float]]:
        assert self.tree is not None
        return {e.id: {"score": self.tree.nodes[e.dst].priority or 0.0} for e in self.tree.edges if e.ok}  # type: ignore[index]

    def loop(self) -> None:
        cfg, tree = self.config, self.tree
        assert tree is not None
        root = tree.root
        if self.queue is None or not root.expanded:  # a later call (after a refused proof) goes on with the queue
            root.priority = 0.0
            self.queue = [(-0.0, root.id)]
        queue = self.queue
        while not root.solved:
            if cfg.max_steps is not None and self.expansions >= cfg.max_steps:
                self.stop_reason = f"expansion budget spent ({cfg.max_steps})"
                return
            if self.out_of_time():
                return
            with self.tracer.span("select", expansion=self.expansions) as info:
                node = None
                while queue:
                    _, nid = heapq.heappop(queue)
                    n = tree.nodes[nid]
                    if not (n.expanded or n.solved or n.dead):
                        node = n
                        break
                info["node"] = node.id if node else None
            if node is None:
                self.stop_reason = "queue empty: every branch failed"
                root.dead = True
                return
            new = self.expand(node, cfg.width)
            with self.tracer.span("backup", expansion=self.expansions):
                for e in new:
                    child = tree.nodes[e.dst]  # type: ignore[index]
                    if child.priority is None:  # first path to a state wins (merged states keep their priority)
                        child.logprob = node.logprob + self.tactic_logprob(e.logprob_sum, e.logprob_mean)
                        child.priority = self.priority(child)
                        heapq.heappush(queue, (-child.priority, child.id))
