"""The registry of the papers' claims: what ``proofrl bench`` runs, in report order.

Each paper's claims and their run functions live in a module of their own (:mod:`.reap`, :mod:`.unlikely`,
:mod:`.kimina`, :mod:`.leanlistener`, :mod:`.eva`; :mod:`.unlikely_toy` for Rewarding the Unlikely's toy of its
App. A; :mod:`.memory` for the library-learning prover's: Tactician's online memory, Rango's retrieval);
:class:`~.claim.Claim` says what a claim is.
"""

from __future__ import annotations

from ..runner import select
from . import eva, kimina, leanlistener, memory, reap, unlikely, unlikely_toy
from .claim import Claim, ClaimRun, Results

__all__ = ["CLAIMS", "Claim", "ClaimRun", "Results", "get_claims"]

CLAIMS: dict[str, Claim] = {
    c.name: c for m in (reap, unlikely, unlikely_toy, kimina, leanlistener, eva, memory) for c in m.CLAIMS
}


def get_claims(names: list[str] | tuple[str, ...] | None = None) -> list[Claim]:
    """The named claims (all, in registry order, by default); an unknown name is one ``ConfigError``."""
    return [CLAIMS[n] for n in select(names, CLAIMS, flag="--claim", what="claim")]
