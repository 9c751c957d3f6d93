"""Lean goals as the AND nodes of a search: when goals are independent, how one is focused, how the proof
of a focused goal is written back.

reap (``childKindAfterTactic``) makes an AND node when a tactic leaves several goals and no goal mentions a
metavariable: then no goal's proof can assign something another goal depends on, and each may be proved on
its own. Lean prints a metavariable as ``?x``, ``?m.12``, ``?_`` or ``?u.1`` (a universe), so a goal text
holding ``?`` before a name or ``_`` is not independent (:func:`decomposable`).

The REPL cannot hide goals (reap's ``setGoals [g]`` runs inside Lean), so a focused goal is a *view* of a
REPL proof state whose main goal is ours, with the sibling goals behind it (``ProofState.background``).
Tactics run on the main goal; after each step the goals behind ours must come back exactly as they were,
else the step touched a sibling and fails. The view is written ``focus_goal i`` (reap's name) in a state's
tactic path and is never sent to Lean:

* goal 1 is already the main goal of the AND node's state;
* goal i > 1 becomes the main goal of the state reached by proving goals 1 … i−1 of that same state in order,
  once a search has done so (the order a bullet proof replays them in, so the recorded REPL states are the
  ones walked); before that, ``rotate_left (i−1)`` (core Lean) brings it to the front.

A solved AND node is written as Lean bullets, one per goal in order (:func:`bullets`): each ``·`` focuses the
main goal and must close it, and the final check elaborates the whole proof in a fresh process.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

FOCUS = re.compile(r"^focus_goal ([1-9][0-9]*)$")
_METAVARIABLE = re.compile(r"(?<![\w'!?.])\?(?:[^\W\d]|_)")


def focus_tactic(i: int) -> str:
    """The focus step of goal ``i`` (1-based) of an AND node."""
    return f"focus_goal {i}"


def focus_index(tactic: str) -> int | None:
    """``i`` when ``tactic`` is the focus step :func:`focus_tactic` writes, else None."""
    m = FOCUS.match(tactic.strip())
    return int(m.group(1)) if m else None


def has_metavariable(goal: str) -> bool:
    """Whether a goal text (hypotheses or conclusion) mentions a metavariable (``?x``, ``?m.3``, ``?_``)."""
    return _METAVARIABLE.search(goal) is not None


def decomposable(goals: Sequence[str]) -> bool:
    """reap's rule: several goals, none mentioning a metavariable."""
    return len(goals) > 1 and not any(has_metavariable(g) for g in goals)


def bullets(blocks: Sequence[Sequence[str]]) -> list[str]:
    """The proof lines of an AND node: each goal's lines as one ``·`` bullet, in goal order (continuation
    lines indented under the bullet, so nested AND nodes nest)."""
    out: list[str] = []
    for lines in blocks:
        text = "\n".join(lines).split("\n")
        out.append("· " + text[0])
        out += ["  " + line if line.strip() else line for line in text[1:]]
    return out


@dataclass(frozen=True)
class Focus:
    """A focused goal's handle: ``proof_state``, the REPL state whose main goal is ours (None until it is
        reached), and ``rest``, the goals behind ours (as :class:`~proofrl.provers.base.Goal` renders them, so
    texts compare whatever spacing Lean chose). ``source`` is the AND node's REPL state
        and ``index`` our goal's number in it; ``siblings`` are that state's goals up to ``outer``, the goals
        behind the AND node's own (when it sits inside a focused goal)."""

    proof_state: int | None
    rest: tuple[str, ...]
    source: int
    index: int
    siblings: tuple[str, ...]
    outer: tuple[str, ...] = ()
    history: tuple[str, ...] = ()
    """the tactics Lean ran, in order, to reach ``proof_state`` (the AND node's path, siblings proved before
    ours, a ``rotate_left``): what confirms a closing step on a REPL without ``proofStatus``"""

    def in_order(self, remaining: tuple[str, ...]) -> bool:
        """Whether ``remaining`` (the goals after ours is proved) are the AND node's next goals in order, so
        the state holding them is where goal ``index + 1`` is the main goal."""
        return remaining == self.siblings[self.index :] + self.outer
