"""Premise retrieval as a tactic source: the library's lemmas whose statements are most like the state, applied.

* **The idea** (ReProver's and Rango's premise retrieval, CoqHammer's premise selection): a small model cannot
  remember a library's lemma names, and a memory of proofs holds only the lemmas earlier proofs happened to use;
  the statements themselves say which lemmas could close or rewrite a goal. For a state, the ``k`` lemmas whose
  statements score best against it by BM25 are proposed as ``apply L.``, ``rewrite L.`` and ``rewrite <- L.``
  (:data:`TEMPLATES`), ``L`` fully qualified so it resolves without any ``Import``.
* **The index** is a :class:`~proofrl.policy.memory.ProofMemory` whose "state" is a lemma's statement and whose
  "tactic" is its qualified name: the same BM25 (the same terms, the same lazily rebuilt index), and
  :meth:`PremisePolicy.add` puts a lemma in at once, as a library read in order states it.
* **Priors**: a premise's share of the retrieved premises' scores, split evenly over its templates, as a
  log-probability (the k-NN source's convention, :func:`~proofrl.policy.memory.knn_proposals`).
* **What it cannot know**: whether a lemma is stated before the theorem (the judge's placement wall refuses a
  proof that uses one that is not), and whether the name resolves (a lemma inside a nested module of its file
  does not under its file's name: the step fails and the search goes on; :func:`unresolved` counts them).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from .memory import ProofMemory
from .sources import Proposal

TEMPLATES = ("apply {}.", "rewrite {}.", "rewrite <- {}.")
"""how a retrieved premise is used"""


class PremisePolicy:
    """Premises retrieved by statement (module docstring) as a :class:`~proofrl.policy.sources.TacticPolicy`."""

    name = "premises"
    source = "premises"
    thread_safe = True

    def __init__(self, memory: ProofMemory | None = None, *, templates: Sequence[str] = TEMPLATES):
        self.memory = memory if memory is not None else ProofMemory(cap=None)
        self.templates = tuple(templates)
        self.failures = 0

    def add(self, name: str, statement: str) -> None:
        """A lemma the prover may now cite: its qualified ``name`` and its ``statement``."""
        self.memory.add(statement, name, theorem=name, online=False)

    def add_many(self, lemmas: Iterable[tuple[str, str]]) -> None:
        """:meth:`add` for each ``(name, statement)``."""
        for name, statement in lemmas:
            self.add(name, statement)

    def propose(self, state_text: str, k: int) -> list[Proposal]:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        try:
            near = self.memory.neighbours(state_text, max(1, math.ceil(k / len(self.templates))))
        except Exception:  # retrieval never sinks a search
            self.failures += 1
            return []
        total = sum(n.score for n in near)
        if total <= 0:
            return []
        out = []
        for n in near:
            lp = math.log(n.score / total / len(self.templates))
            out += [Proposal(t.format(n.tactic), lp, lp, 1, 1, self.source) for t in self.templates]
        return out[:k]


def unresolved(edges: Iterable[Any]) -> int:
    """How many of a search tree's tactic edges proposed from retrieved premises failed because Coq does not
    know the premise's name (the tree's ``edges``: each with ``source`` and ``failure``)."""
    return sum(
        "premises" in (e.source or "")
        and e.failure is not None
        and "was not found in the current environment" in e.failure.message
        for e in edges
    )
