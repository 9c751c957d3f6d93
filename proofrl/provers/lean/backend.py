"""Lean 4 as a :class:`~proofrl.provers.backend.Backend`: ```` ```lean4 ```` fences, ``/- … -/`` and ``--``
comments, the REPL (``PROOFRL_LEAN_REPL``), reap's forbidden syntax, ``focus_goal i`` views and ``·`` bullets
(:mod:`proofrl.provers.lean.goals`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..backend import Backend, with_newline
from ..base import ProofState, Prover
from . import goals as lean_goals

if TYPE_CHECKING:
    from ..base import Verdict
    from ..jobs import Job, Snippet, StatedProblem

_FORBIDDEN = re.compile(r"(?<![\w.'])(sorry|admit)(?![\w'])")
_QUERY = re.compile(r"[\w'!]\?")  # exact?, apply?, simp?, simp_all? ... (``?_`` holes start with ``?``)


def goal_count_text(state: str) -> int:
    """Goals in a Lean pretty-printed tactic state (LeanDojo's traced states): 0 for ``no goals``, else the
    ``N goals`` first line Lean's info view writes when present, else the ``⊢`` lines."""
    s = state.strip()
    if not s or s == "no goals":
        return 0
    if m := re.match(r"(\d+) goals?\b", s):
        return int(m.group(1))
    return max(1, len(re.findall(r"(?m)^⊢", s)))


class LeanBackend(Backend):
    name = "lean"
    fence = "lean4"
    block_comment = ("/-", "-/")
    line_comment = "--"
    install_hint = (
        "install Lean with elan "
        "(curl https://raw.githubusercontent.com/leanprover/elan/master/elan-init.sh -sSf | sh), "
        "build leanprover-community/repl and set PROOFRL_LEAN_REPL (docs/lean.md)"
    )
    # Lean declarations are lower-case and end in ``:=`` (``:= by``, ``:= by sorry``)
    statement = re.compile(r"^\s*(?:@\[[^\]]*\]\s*)?(?:theorem|lemma|example)\b[\s\S]*:=\s*(?:by\b)?\s*(?:sorry)?\s*$")
    header = re.compile(r"(?m)^\s*import\s+\w")

    def config_class(self) -> type:
        from .config import LeanConfig

        return LeanConfig

    def prover_factory(self, **options: Any) -> Callable[..., Prover]:
        from .config import LeanConfig
        from .prover import LeanProver

        # the REPL is where PROOFRL_LEAN_REPL says (unset: one-line BackendUnavailable); options override it
        cfg = LeanConfig(**options) if "command" in options else LeanConfig.from_env(**options)
        return lambda header: LeanProver(cfg, header)

    def require(self) -> None:
        from ...errors import BackendUnavailable
        from .config import diagnose

        ok, why = diagnose()
        if not ok:
            raise BackendUnavailable("lean", f"{why}; {self.install_hint}")

    def cut(self, code: str) -> Job | Verdict:
        from .snippet import lean_job

        return lean_job(code)

    def join(self, problem: StatedProblem, proof: str) -> Snippet:
        from .snippet import lean_snippet

        return lean_snippet(problem, proof)

    def completion_prefix(self, problem: StatedProblem) -> str:
        """The header, the informal statement's doc comment and the statement as the problem gives it."""
        return problem.header + problem.informal_prefix + problem.formal_statement

    def proof_from_completion(self, problem: StatedProblem, body: str) -> str | None:
        return problem.formal_statement + body if body.strip() else None

    def completion_code(self, problem: StatedProblem, proof: str) -> tuple[str, str]:
        """``proof``, the text after ``:= by``, indented two spaces: after the statement as the prompt ends with
        it, and in a chat answer after the header and statement."""
        body = "\n".join("  " + line if line.strip() else line for line in proof.strip("\n").split("\n"))
        continuation = ("" if problem.formal_statement.endswith("\n") else "\n") + body
        return continuation, f"{with_newline(problem.header)}{with_newline(problem.formal_statement)}{body}\n"

    def same_statement(self, got: Sequence[str], want: Sequence[str]) -> bool:
        """The server's statement runs up to its ``:=``; the problem's may go on with ``by`` (``sorry``)."""
        return list(want[: len(got)]) == list(got) and all(t in ("by", "sorry") for t in want[len(got) :])

    def refusal(self, tactic: str) -> str | None:
        """reap's forbidden syntax kinds: ``sorry``, ``admit``, ``repeat'`` and any tactic whose name ends in
        ``?``; and the focus steps, which the search writes itself."""
        if why := super().refusal(tactic):
            return why
        if m := _FORBIDDEN.search(tactic):
            return f"forbidden: {m.group(1)}"
        if "repeat'" in tactic:
            return "forbidden: repeat'"
        if lean_goals.focus_index(tactic) is not None:
            return "forbidden: focus steps are managed by the search"
        if m := _QUERY.search(tactic):
            return f"forbidden: {tactic[max(0, m.start() - 20) : m.end()].split()[-1]}"
        return None

    def is_structural(self, tactic: str) -> bool:
        """A bare bullet (``·``, ``.``: LeanDojo traces them as tactics of their own) or a focus step."""
        return tactic.strip() in ("·", ".") or lean_goals.focus_index(tactic) is not None

    def decomposable(self, state: ProofState) -> bool:
        return lean_goals.decomposable([str(g) for g in state.goals])

    def focus_tactic(self, i: int) -> str:
        return lean_goals.focus_tactic(i)

    def and_node_lines(self, blocks: Sequence[Sequence[str]]) -> list[str]:
        """One ``·`` bullet per goal, in goal order."""
        return lean_goals.bullets(blocks)
