"""A scripted tactic policy for search tests: a fixed map from state substrings to tactic lists (a test
policy, not a mock of the prover — every tactic runs in real Coq)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from proofrl.search.policy import Proposal


class ScriptedPolicy:
    """``table``: ``[(substring of the state text, [tactics...]), ...]``, first match wins; tactic i gets
    log-prob sum −1 − i (mean −0.5 − i/2). ``hook(state_text, calls)`` runs before each answer (kills, raises)."""

    def __init__(
        self,
        table: Sequence[tuple[str, Sequence[str]]],
        default: Sequence[str] = (),
        hook: Callable[[str, int], None] | None = None,
    ):
        self.name = "scripted"
        self.table, self.default, self.hook = list(table), list(default), hook
        self.calls = 0
        self.seen: list[str] = []

    def propose(self, state_text: str, k: int) -> list[Proposal]:
        self.calls += 1
        self.seen.append(state_text)
        if self.hook is not None:
            self.hook(state_text, self.calls)
        tactics = next((list(t) for key, t in self.table if key in state_text), self.default)
        return [Proposal(t, -1.0 - i, -0.5 - i / 2) for i, t in enumerate(tactics)][:k]
