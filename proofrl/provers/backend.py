"""The backend object: everything in proofrl that depends on which proof assistant judges the proofs.

A backend is one subclass of :class:`Backend` in its own folder (``provers/coq/backend.py``,
``provers/lean/backend.py``) and one line in :data:`BACKENDS` (``register_backend(name, "module:Class")``,
imported only when first asked for). Everything above ``provers/`` asks :func:`get_backend` instead of
comparing names: the code fence and comment syntax of prompts and rewards, the per-process config and the
prover factory (:func:`proofrl.provers.factory.make_pool` is the only way to build a pool), the snippet cut
and join (:mod:`proofrl.provers.snippets`), the search's tactic refusal and normalisation, bullets and focus syntax,
AND-node rules, and the install hint a missing prover is reported with.

Two things are the same for every backend and live here as functions:

* :func:`state_text`, the text of a state as the tactic policy sees it (the transitions, the search, value
  targets and EVA all render states with it, so the policy sees the text it was taught on);
* :func:`goal_count`, G(s) of LeanListener's step reward (arXiv:2503.09730 §3: "the number of sub-goals" the
  verifier reports): every goal still owed, in every list the backend keeps (Coq: foreground, unfocused,
  shelved and given up; Lean reports foreground goals only). Moving a goal out of sight (unfocusing, shelving,
  giving up) is no progress, so it still counts. The step reward, the transitions' ``goals_before`` /
  ``goals_after``, EVA's labels and the search's ``−(open goals)`` leaf value all use this one count.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import ConfigError
from ..registry import load_target
from .base import ProofState, Prover

if TYPE_CHECKING:
    from .base import Verdict
    from .jobs import Job, Snippet, StatedProblem


def state_text(state: ProofState) -> str:
    """The text of a state as the tactic policy sees it: every foreground goal (hypotheses, then
    ``⊢ conclusion``), goals separated by a blank line, and a last line with the goals that are not in the
    foreground when there are any (``(+ 1 unfocused, 0 shelved)``); ``no goals`` when nothing is left."""
    if state.solved:
        return "no goals"
    parts = [str(g) for g in state.goals]
    rest = state.background + state.shelved + state.given_up
    if rest or not parts:
        counts = f"{state.background} unfocused, {state.shelved} shelved"
        counts += f", {state.given_up} given up" if state.given_up else ""
        parts.append(f"(+ {counts})")
    return "\n\n".join(parts)


def with_newline(text: str) -> str:
    """``text`` ending in a newline (empty stays empty): how headers and statements are joined."""
    return text if not text or text.endswith("\n") else text + "\n"


def goal_count(state: ProofState) -> int:
    """G(s): every goal still owed (foreground + unfocused + shelved + given up); see the module docstring."""
    return state.goal_count


class Backend:
    """One proof assistant, as the rest of proofrl sees it. Subclasses set the class attributes and the
    methods without a default; the defaults are what a backend without the feature does."""

    name: ClassVar[str]
    fence: ClassVar[str]
    """the language tag of a fenced code block (```` ```coq ````, ```` ```lean4 ````) in prompts and answers"""
    block_comment: ClassVar[tuple[str, str]]
    """nested block comments, opener and closer"""
    line_comment: ClassVar[str | None] = None
    """a comment to the end of the line, when the language has one"""
    install_hint: ClassVar[str]
    """how to install the prover here, quoted when it is missing"""
    statement: ClassVar[re.Pattern[str]]
    """a formal statement in this language (the JSONL loaders' guess of a problem's backend)"""
    header: ClassVar[re.Pattern[str]]
    """an import line of a header in this language (breaks ties when the statement says nothing)"""

    # -- provers ------------------------------------------------------------------------------------------
    def config_class(self) -> type:
        """The per-process config dataclass whose fields are the ``prover:`` options."""
        raise NotImplementedError

    def prover_factory(self, **options: Any) -> Callable[..., Prover]:
        """``factory(header) -> started prover``; ``options`` go to :meth:`config_class`."""
        raise NotImplementedError

    def search_options(self, tactic_timeout: float) -> dict[str, Any]:
        """The prover options a search sets from its own settings (its per-tactic time limit)."""
        return {}

    def require(self) -> None:
        """Raise :class:`~proofrl.errors.BackendUnavailable` (one line, naming the install) unless the prover
        can run here."""
        raise NotImplementedError

    # -- whole proofs -------------------------------------------------------------------------------------
    def cut(self, code: str) -> Job | Verdict:
        """A whole source text (header, statement, proof) cut into a job, or the verdict refusing it (the
        server's side of :mod:`proofrl.provers.snippets`)."""
        raise NotImplementedError

    def join(self, problem: StatedProblem, proof: str) -> Snippet:
        """Header, statement and proof joined into the text :meth:`cut` reads back (a client's side)."""
        raise NotImplementedError

    def completion_prefix(self, problem: StatedProblem) -> str:
        """Whole-proof prompts of the completion kind: the code the prompt ends with (header, statement and
        what opens its proof), which the model continues."""
        raise NotImplementedError

    def proof_from_completion(self, problem: StatedProblem, body: str) -> str | None:
        """The proof to judge from what a completion wrote after :meth:`completion_prefix` (cut at the prompt
        format's stop strings); None when it wrote nothing."""
        raise NotImplementedError

    def proof_from_answer(self, problem: StatedProblem, code: str) -> str:
        """The proof to judge from the code block of a chat answer (which may restate the header)."""
        return code

    def completion_code(self, problem: StatedProblem, proof: str) -> tuple[str, str]:
        """A proof written the two ways a prompt format's targets hold it: the continuation of
        :meth:`completion_prefix`, and the code block of a chat answer."""
        raise NotImplementedError

    def proof_steps(self, proof: str, statement: str) -> list[tuple[int, str]] | None:
        """The steps of a whole-proof text to replay one by one, each with the character offset where it ends
        (a restated statement and the proof's opening and closing left out); None where the backend cannot
        cut a proof text into steps."""
        return None

    def same_statement(self, got: Sequence[str], want: Sequence[str]) -> bool:
        """Whether a cut statement's tokens ``got`` state the problem's statement ``want`` (tokens)."""
        return list(got) == list(want)

    # -- tactics ------------------------------------------------------------------------------------------
    def normalize_tactic(self, tactic: str) -> str:
        """Whitespace collapsed, so ``intros  n`` and ``intros n`` are one tactic of the search."""
        return " ".join(tactic.split())

    def refusal(self, tactic: str) -> str | None:
        """Why the search refuses a proposed tactic before the prover sees it, or None."""
        return "forbidden: empty tactic" if not tactic.strip() else None

    def is_structural(self, tactic: str) -> bool:
        """A bullet, brace or focus step: it moves between goals, it proves nothing."""
        return False

    # -- goals as AND nodes -------------------------------------------------------------------------------
    def decomposable(self, state: ProofState) -> bool:
        """reap's rule for an AND node: several goals, each provable on its own. Default: never."""
        return False

    def focus_tactic(self, i: int) -> str:
        """The focus step from an AND node to its goal ``i`` (1-based)."""
        raise NotImplementedError(f"{self.name}: no AND nodes")

    def and_node_lines(self, blocks: Sequence[Sequence[str]]) -> list[str]:
        """A solved AND node's proof lines from each goal's lines, in goal order."""
        raise NotImplementedError(f"{self.name}: no AND nodes")


BACKENDS: dict[str, str] = {}
"""name → ``"module:Class"`` of each backend, imported when first asked for."""


def register_backend(name: str, target: str) -> None:
    """Make ``name`` a backend: ``target`` is the ``"module:Class"`` of its :class:`Backend` subclass."""
    if name in BACKENDS and BACKENDS[name] != target:
        raise ValueError(f"backend {name!r} is already registered ({BACKENDS[name]})")
    BACKENDS[name] = target


register_backend("coq", "proofrl.provers.coq.backend:CoqBackend")
register_backend("lean", "proofrl.provers.lean.backend:LeanBackend")


def backend_names() -> list[str]:
    return list(BACKENDS)


@cache
def _load(name: str, target: str) -> Backend:
    backend = load_target(target)()
    if backend.name != name:
        raise ValueError(f"{target} is backend {backend.name!r}, registered as {name!r}")
    return backend


def get_backend(name: str) -> Backend:
    """The backend registered as ``name``; an unknown name is one :class:`ConfigError` line listing the others."""
    if name not in BACKENDS:
        raise ConfigError(f"unknown backend {name!r}; choose one of {backend_names()}")
    return _load(name, BACKENDS[name])


def backend_of_prover(prover: str, default: str = "coq") -> str:
    """The backend whose name a verdict's ``prover`` field starts with (``coq-8.16``, ``lean4 …``), else
    ``default``."""
    low = prover.lower()
    return next((name for name in BACKENDS if low.startswith(name)), default)


def guess_backend(header: str, statement: str) -> str | None:
    """The one backend whose statement syntax ``statement`` has (ties broken by the header's imports), or None
    when the text says none or several."""
    backends = [get_backend(n) for n in BACKENDS]
    hits = [b.name for b in backends if b.statement.match(statement)]
    if len(hits) != 1:
        hits = [b.name for b in backends if b.header.search(header)]
    return hits[0] if len(hits) == 1 else None
