"""What both engines share: the prover and policy calls (traced), tactic refusal, crash retry, expansion into
the tree, AND-node decomposition, budgets and the end of a search (replay and final check).

A solved root is never the end by itself: its proof goes to the final check in a fresh process; when that
refuses it, the proof's closing leaves are marked unsound (:meth:`SearchTree.mark_unsound`) and the engine's
loop goes on within its budget. ``proved`` needs a valid final check; ``unsound`` means the budget ended with
only refused proofs found; ``failed`` that none was found.

A search runs on one prover process it holds alone (a pool lease). A prover that dies mid-search is restarted
by the backend on the next call, which re-reaches the state by replaying its tactic path; a step that crashed
is retried once that way before it is recorded as a ``crash`` edge.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ProverError, StatementError
from ..policy.sources import longer_cap
from ..provers import stepping
from ..provers.backend import (
    get_backend,
    goal_count,
    state_text,  # the text the tactic policy was taught on
)
from ..provers.base import FailureKind, Prover, StepFailure, StepResult, Theorem, Verdict
from .config import SearchConfig
from .final_check import final_verdict, script_text
from .policy import PolicyError, Proposal, TacticPolicy, ValueFn
from .trace import Tracer
from .tree import Edge, Failure, Node, SearchTree, normalize_tactic, refusal

SearchStatus = Literal["proved", "failed", "unsound", "error"]

MIN_STEP_SECONDS = 0.05
"""the least timeout a step gets when the budget is nearly spent (Coq's ``Timeout`` rounds it up to 1 s)"""


@dataclass
class SearchResult:
    """How one theorem's search ended. ``proved`` only when the final check in a fresh process is valid."""

    name: str
    status: SearchStatus
    proof: str = ""
    verdict: Verdict | None = None
    reason: str = ""
    expansions: int = 0
    steps: int = 0
    """prover steps run (tactics and focus steps, retries included)"""
    iterations: int = 0
    """MCTS selection-expansion-backup rounds (0 for best-first)"""
    seconds: float = 0.0
    tree: SearchTree | None = None
    algorithm: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    policy_error: str = ""
    crashes: int = 0
    scores: dict[int, dict[str, float]] = field(default_factory=dict)
    """per edge at the end of the search: MCTS ``{c, prior, Q, U, score}``, best-first ``{score}``"""
    refused: int = 0
    """proofs the search found that the final check refused (their closing leaves are marked unsound)"""

    def line(self) -> dict[str, Any]:
        """The ``results.jsonl`` record."""
        return {
            "name": self.name,
            "status": self.status,
            "proof": self.proof,
            "verdict": self.verdict.to_json() if self.verdict else None,
            "reason": self.reason,
            "expansions": self.expansions,
            "steps": self.steps,
            "iterations": self.iterations,
            "seconds": round(self.seconds, 4),
            "algorithm": self.algorithm,
            "nodes": len(self.tree.nodes) if self.tree else 0,
            "refused_proofs": self.refused,
            "failed_edges": sum(e.failure is not None for e in self.tree.edges) if self.tree else 0,
            "proof_sources": dict(Counter(s for _, _, s in self.proof_steps())) if self.status == "proved" else {},
        }

    def proof_steps(self) -> list[tuple[str, str, str]]:
        """The found proof's tactic steps as ``(state text the policy saw, tactic, source)``, in tree order (focus
        steps left out: the search writes those itself); empty when no proof was found."""
        tree = self.tree
        if tree is None or not tree.root.solved:
            return []
        steps = (tree.edges[i] for i in tree.solution())
        return [(state_text(tree.nodes[e.src].state), e.tactic, e.source) for e in steps if e.kind == "tactic"]

    def tree_json(self, scores: dict[int, dict[str, float]] | None = None) -> dict[str, Any]:
        """The whole tree (``SearchTree.to_json``) under a ``search`` header (reap's raw tree, extended)."""
        head = {k: v for k, v in self.line().items()}
        head["theorem"] = {"name": self.name} | (
            {"statement": self.tree.theorem.statement, "header": self.tree.theorem.header} if self.tree else {}
        )
        head["config"] = self.config
        head["policy_error"] = self.policy_error
        head["crashes"] = self.crashes
        scores = self.scores if scores is None else scores
        return {"search": head, **(self.tree.to_json(scores) if self.tree else {"nodes": [], "edges": []})}


class Search:
    """Base of :class:`~proofrl.search.best_first.BestFirstSearch` and :class:`~proofrl.search.mcts.MCTS`."""

    algorithm = ""
    decompose = False

    def __init__(
        self,
        prover: Prover,
        policy: TacticPolicy,
        config: SearchConfig | None = None,
        tracer: Tracer | None = None,
        value_fn: ValueFn | None = None,
    ):
        self.prover = prover
        self.policy = policy
        self.value_fn = value_fn
        self.config = config or SearchConfig(algorithm=self.algorithm)
        self.lang = get_backend(self.config.backend)
        self.tracer = tracer or Tracer()
        self.tree: SearchTree | None = None
        self.expansions = self.steps = self.iterations = self.crashes = 0
        self.deadline = math.inf
        self.stop_reason = ""
        self.sound: tuple[str, Verdict] | None = None  # (proof, valid verdict)
        self.refused: list[tuple[str, Verdict]] = []  # proofs the final check refused, in order

    # -- to implement -----------------------------------------------------------------------------------
    @property
    def seconds_budget(self) -> float | None:
        raise NotImplementedError

    def loop(self) -> None:
        raise NotImplementedError

    def prior(self, p: Proposal) -> float:
        raise NotImplementedError

    def scores(self) -> dict[int, dict[str, float]]:
        return {}

    # -- a whole search ---------------------------------------------------------------------------------
    def run(self, theorem: Theorem) -> SearchResult:
        t0 = time.monotonic()
        cfg = self.config.model_dump(mode="json")
        policy_error = ""
        with self.tracer.span("search", algorithm=self.algorithm) as info:
            budget = self.seconds_budget
            self.deadline = t0 + budget if budget else math.inf
            try:
                root = self.prover.start(theorem, timeout=self.step_timeout())
            except StatementError as e:
                info["status"] = "error"
                return SearchResult(
                    theorem.name,
                    "error",
                    reason=f"statement does not elaborate: {e}",
                    seconds=time.monotonic() - t0,
                    algorithm=self.algorithm,
                    config=cfg,
                )
            except ProverError as e:
                info["status"] = "error"
                return SearchResult(
                    theorem.name,
                    "error",
                    reason=f"prover failed at start: {e}",
                    seconds=time.monotonic() - t0,
                    algorithm=self.algorithm,
                    config=cfg,
                )
            self.tree = SearchTree(theorem, root, decompose=self.decompose, backend=self.config.backend)
            self.sound, self.refused = None, []
            try:
                if self.tree.root.kind == "AND":
                    self.decompose_node(self.tree.root)
                self.loop()
                while self.tree.root.solved and not self.judge(theorem):
                    self.loop()  # the refused proof's leaves are dead: search on within the budget
            except PolicyError as e:
                policy_error = str(e)
            result = self.finish(theorem, t0, policy_error)
            result.scores = self.scores()
            info["status"] = result.status
        result.seconds = time.monotonic() - t0
        return result

    def judge(self, theorem: Theorem) -> bool:
        """The solved tree's proof through the final check. True (kept as the result) when valid; else its
        closing leaves are marked unsound with the verdict and False."""
        tree = self.tree
        assert tree is not None
        script = tree.script()
        verdict = final_verdict(
            self.prover, theorem, script, timeout=self.config.final_check_timeout, tracer=self.tracer
        )
        proof = script_text(script)
        if verdict.valid:
            self.sound = (proof, verdict)
            return True
        self.refused.append((proof, verdict))
        tree.mark_unsound(f"final check: {verdict}")
        return False

    def finish(self, theorem: Theorem, t0: float, policy_error: str = "") -> SearchResult:
        tree = self.tree
        assert tree is not None
        common = dict(
            expansions=self.expansions,
            steps=self.steps,
            iterations=self.iterations,
            tree=tree,
            algorithm=self.algorithm,
            config=self.config.model_dump(mode="json"),
            crashes=self.crashes,
            refused=len(self.refused),
        )
        if self.sound is not None:
            proof, verdict = self.sound
            return SearchResult(theorem.name, "proved", proof, verdict, "final check valid", **common)  # type: ignore[arg-type]
        if policy_error:
            return SearchResult(theorem.name, "error", reason=policy_error, policy_error=policy_error, **common)  # type: ignore[arg-type]
        stop = self.stop_reason or ("every branch failed" if tree.root.dead else "budget spent")
        if self.refused:  # the last refused proof stands for them all
            proof, verdict = self.refused[-1]
            reason = f"final check: {verdict} ({len(self.refused)} proof(s) refused, no sound one; {stop})"
            return SearchResult(theorem.name, "unsound", proof, verdict, reason, **common)  # type: ignore[arg-type]
        return SearchResult(theorem.name, "failed", reason=stop, **common)  # type: ignore[arg-type]

    def out_of_time(self) -> bool:
        if time.monotonic() >= self.deadline:
            self.stop_reason = "seconds budget spent"
            return True
        return False

    def step_timeout(self) -> float:
        """Seconds the next prover call may take: ``tactic_timeout``, cut to what is left of the search's
        ``seconds`` budget (at least :data:`MIN_STEP_SECONDS`), so one slow tactic cannot overrun the budget
        by more than Coq's whole-second ``Timeout`` rounding and the process deadline's grace."""
        left = self.deadline - time.monotonic()
        return max(MIN_STEP_SECONDS, min(self.config.tactic_timeout, left))

    # -- calls ----------------------------------------------------------------------------------------
    def step(self, node: Node, tactic: str, cap: float | None = None) -> StepResult:
        """One prover step from ``node``'s state, within :meth:`step_timeout` and ``cap`` (a proposal's own
        limit); a crash is retried once on the restarted process (which re-reaches the state by replaying its
        path)."""
        with self.tracer.span("tactic", node=node.id, tactic=tactic[:200]) as info:

            def crashed(failure: StepFailure) -> None:  # the retry is a step of its own
                self.crashes += 1
                self.steps += 1
                info["retried_after_crash"] = failure.message[:200]

            self.steps += 1

            def timeout() -> float:
                return self.step_timeout() if cap is None else max(MIN_STEP_SECONDS, min(cap, self.step_timeout()))

            r = stepping.step(self.prover, node.state, tactic, timeout, on_crash=crashed)
            info["ok"] = r.ok
            if r.failure is not None:
                info["failure"] = r.failure.kind.value
        return r

    def propose(self, node: Node, k: int) -> list[Proposal]:
        with self.tracer.span("policy", node=node.id, k=k) as info:
            try:
                props = list(self.policy.propose(state_text(node.state), k))
            except Exception as e:  # any failure of the model or endpoint ends the search
                info["error"] = f"{type(e).__name__}: {e}"[:500]
                raise PolicyError(
                    f"policy failed at node {node.id} after {self.expansions} expansions: {type(e).__name__}: {e}"
                ) from e
            info["proposals"] = len(props)
        return props

    # -- expansion ------------------------------------------------------------------------------------
    def expand(self, node: Node, k: int) -> list[Edge]:
        """Propose ``k`` tactics, merge repeated strings (priors added), refuse forbidden ones, run the rest;
        returns the new live edges. Failed tactics stay as edges with their failure."""
        tree = self.tree
        assert tree is not None
        props = self.propose(node, k)
        self.expansions += 1
        node.evaluations += 1
        merged: dict[str, list[float]] = {}  # tactic -> [prior, logprob_sum, logprob_mean]
        sources: dict[str, str] = {}  # tactic -> the policy source(s) that proposed it
        caps: dict[str, float | None] = {}  # tactic -> its step cap (None: none)
        default_source = str(getattr(self.policy, "name", "")).split(":")[0]
        for p in props:
            t = normalize_tactic(p.tactic, self.config.backend)
            src = getattr(p, "source", "") or default_source
            cap = getattr(p, "seconds", None)
            if t in merged:
                merged[t][0] += self.prior(p)
                merged[t][1] = max(merged[t][1], p.logprob_sum)
                merged[t][2] = max(merged[t][2], p.logprob_mean)
                if src not in sources[t].split("+"):
                    sources[t] += "+" + src
                caps[t] = longer_cap(caps[t], cap)
            else:
                merged[t] = [self.prior(p), p.logprob_sum, p.logprob_mean]
                sources[t] = src
                caps[t] = cap
        new: list[Edge] = []
        for t, (prior, lp_sum, lp_mean) in merged.items():
            if (old := tree.edge_for(node, t)) is not None:  # proposed again (progressive sampling)
                old.prior_raw += prior
                continue
            if self.out_of_time():  # the proposals not yet stepped are not run (and not in the tree)
                break
            if why := refusal(t, self.config.backend):
                tree.add_failed(
                    node,
                    t,
                    Failure(FailureKind.FORBIDDEN.value, why),
                    logprob_sum=lp_sum,
                    logprob_mean=lp_mean,
                    prior=prior,
                    source=sources[t],
                )
                continue
            r = self.step(node, t, caps[t])
            if r.failure is not None or r.state is None:
                tree.add_failed(
                    node,
                    t,
                    Failure.of(r.failure) if r.failure else Failure("error", "no state"),
                    logprob_sum=lp_sum,
                    logprob_mean=lp_mean,
                    prior=prior,
                    seconds=r.seconds,
                    source=sources[t],
                )
                continue
            n_before = len(tree.nodes)
            e = tree.add_child(
                node,
                t,
                r.state,
                logprob_sum=lp_sum,
                logprob_mean=lp_mean,
                prior=prior,
                seconds=r.seconds,
                source=sources[t],
            )
            if e is None:
                continue
            child = tree.nodes[e.dst]  # type: ignore[index]
            if len(tree.nodes) > n_before and child.kind == "AND":
                self.decompose_node(child)
            new.append(e)
        tree.refresh(node)
        return new

    def decompose_node(self, node: Node) -> None:
        """An AND node gets one focused OR child per goal (``i: {`` in Coq, ``focus_goal i`` in Lean), each with
        prior 1/#goals (reap)."""
        tree = self.tree
        assert tree is not None
        n = len(node.state.goals)
        for i in range(1, n + 1):
            if self.out_of_time():
                break
            tactic = self.lang.focus_tactic(i)
            r = self.step(node, tactic)
            if r.failure is not None or r.state is None:
                tree.add_failed(node, tactic, Failure.of(r.failure) if r.failure else Failure("error", "no state"))
                continue
            tree.add_child(node, tactic, r.state, kind="focus", prior=1.0 / n, focus_index=i, seconds=r.seconds)
        node.evaluations += 1
        tree.refresh(node)

    def leaf_value(self, node: Node) -> float:
        """The value of a new leaf: 0 when its goals are closed, else the value function's (reap's value
        endpoint; −1000 when the call fails, as reap), −(open goals) (G(s), :func:`~proofrl.provers.backend.goal_count`,
        of the goal the node owes), or 0, as configured."""
        if node.closes:
            return 0.0
        if node.estimate is not None:
            return node.estimate
        mode = self.config.value
        if mode == "model" and self.value_fn is not None:
            with self.tracer.span("value", node=node.id) as info:
                try:
                    v = float(self.value_fn.value(state_text(node.state)))
                    if not math.isfinite(v):
                        raise ValueError(f"value {v}")
                except Exception as e:  # reap: a failed value call is -1000
                    info["error"] = f"{type(e).__name__}: {e}"[:300]
                    v = self.config.failed_value
        elif mode == "zero":
            v = 0.0
        else:
            # G(s) of the goal this node owes: inside a focus block the goals behind it belong to its siblings
            v = -float(max(1, goal_count(node.state) - (node.state.background if node.focus_depth else 0)))
        node.estimate = v
        return v
