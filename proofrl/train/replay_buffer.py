"""The replay buffer of search-and-learn and the human-proof rehearsal mixed into every update (the samples
themselves, reap's filters and their value targets: :mod:`proofrl.data.search_samples`)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from ..data.search_samples import ReplaySample


class ReplayBuffer:
    """FIFO of at most ``capacity`` samples (AlphaProof's replay buffer); a sample equal to one already held
    (same state, tactic and target) is not added twice, so four passes finding one proof weigh it once."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.items: list[ReplaySample] = []

    def __len__(self) -> int:
        return len(self.items)

    def add(self, samples: Sequence[ReplaySample]) -> int:
        held = {(s.state, s.tactic, s.cost) for s in self.items}
        new = []
        for s in samples:
            if (s.state, s.tactic, s.cost) not in held:
                held.add((s.state, s.tactic, s.cost))
                new.append(s)
        self.items = (self.items + new)[-self.capacity :]
        return len(new)

    def state_dict(self) -> dict[str, Any]:
        return {"capacity": self.capacity, "items": [s.to_json() for s in self.items]}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.capacity = d["capacity"]
        self.items = [ReplaySample(**s) for s in d["items"]]


def rehearsal_draw(
    human: Sequence[ReplaySample], replay: int, fraction: float, rng: random.Random
) -> list[ReplaySample]:
    """The human samples mixed into an update of ``replay`` search samples so that they make ``fraction`` of it."""
    if not human or replay == 0 or fraction <= 0:
        return []
    k = min(len(human), max(1, round(replay * fraction / (1 - fraction)))) if fraction < 1 else len(human)
    return rng.sample(list(human), k)
