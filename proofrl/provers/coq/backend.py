"""Coq as a :class:`~proofrl.provers.backend.Backend`: ```` ```coq ```` fences, ``(* … *)`` comments,
``coqidetop`` sessions judged again by ``coqc``, sentences that end in a period, ``i: { … }`` focus blocks."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..backend import Backend, with_newline
from ..base import ProofState, Prover

if TYPE_CHECKING:
    from ..base import Verdict
    from ..jobs import Job, Snippet, StatedProblem

_END = re.compile(r"(?<![\w'.])(?:Qed|Defined|Admitted)\.(?=\s|$)")
_BRACES = re.compile(r"\s*(?:\[\s*\w+\s*\]\s*:\s*\{|all\s*:\s*\{|[-+*{}]+\s*\.?)\s*")
_EVAR = re.compile(r"\?[A-Za-z_][\w']*")


def code_mask(text: str) -> list[bool]:
    """True at each character of ``text`` that is Coq code (not inside a nested comment or a string)."""
    mask, depth, in_string, i = [True] * len(text), 0, False, 0
    while i < len(text):
        two = text[i : i + 2]
        if not in_string and two == "(*":
            depth, mask[i : i + 2], i = depth + 1, [False, False], i + 2
            continue
        if not in_string and depth and two == "*)":
            depth, mask[i : i + 2], i = depth - 1, [False, False], i + 2
            continue
        if not depth and text[i] == '"':
            in_string = not in_string  # Coq escapes a quote by doubling it: two toggles, same result
        mask[i] = not depth and not in_string and text[i] != '"'
        i += 1
    return mask


def proof_end(body: str) -> int | None:
    """Offset just after the first ``Qed.``/``Defined.``/``Admitted.`` that is code, if any."""
    mask = code_mask(body)
    return next((m.end() for m in _END.finditer(body) if mask[m.start()]), None)


def mentions_evar(state: ProofState) -> bool:
    """A goal (conclusion or hypothesis) mentions an existential variable (Coq ``?x``), or one is shelved."""
    return state.shelved > 0 or any(_EVAR.search(str(g)) for g in state.goals)


class CoqBackend(Backend):
    name = "coq"
    fence = "coq"
    block_comment = ("(*", "*)")
    install_hint = "apt-get install coq"
    statement = re.compile(r"^\s*(?:Theorem|Lemma|Fact|Remark|Corollary|Proposition|Example)\b[\s\S]*\.\s*$")
    header = re.compile(r"(?m)^\s*(?:From\s+\S+\s+)?Require\b")

    def config_class(self) -> type:
        from .prover import CoqConfig

        return CoqConfig

    def prover_factory(self, **options: Any) -> Callable[..., Prover]:
        """Also takes ``timeout=``: the header must load within it (the pool passes each job's time limit)."""
        from .prover import CoqConfig, CoqProver

        cfg = CoqConfig(**options)
        return lambda header, timeout=None: CoqProver(header, cfg, header_timeout=timeout)

    def search_options(self, tactic_timeout: float) -> dict[str, Any]:
        return {"step_timeout": tactic_timeout}

    def require(self) -> None:
        from ...errors import BackendUnavailable
        from .session import coqidetop_path

        coqidetop_path()  # raises: coqidetop not found on PATH (Debian: apt-get install coq)
        if not shutil.which("coqc"):
            raise BackendUnavailable("coq", f"coqc not found on PATH (Debian: {self.install_hint})")

    def cut(self, code: str) -> Job | Verdict:
        from .snippet import coq_job

        return coq_job(code)

    def join(self, problem: StatedProblem, proof: str) -> Snippet:
        from .snippet import coq_snippet

        return coq_snippet(problem, proof)

    def completion_prefix(self, problem: StatedProblem) -> str:
        return with_newline(problem.header) + problem.formal_statement.rstrip() + "\nProof.\n"

    def proof_from_completion(self, problem: StatedProblem, body: str) -> str | None:
        """Up to the first ``Qed.``/``Defined.``/``Admitted.`` that is code, after ``statement Proof.``."""
        if (end := proof_end(body)) is not None:
            body = body[:end]
        return problem.formal_statement.rstrip() + "\nProof.\n" + body if body.strip() else None

    def proof_from_answer(self, problem: StatedProblem, code: str) -> str:
        """The code without the header lines it restates first (the judge takes the header from the problem)."""
        header = {line.strip() for line in problem.header.splitlines() if line.strip()}
        lines = code.split("\n")
        while lines and (not lines[0].strip() or lines[0].strip() in header):
            lines.pop(0)
        return "\n".join(lines)

    def completion_code(self, problem: StatedProblem, proof: str) -> tuple[str, str]:
        """``proof`` with or without ``Proof.``/``Qed.``: the tactics closed by ``Qed.``, and in a chat answer
        after the statement and ``Proof.``."""
        tactics = re.sub(r"^\s*Proof\.\s*", "", proof.strip())
        if proof_end(tactics) is None:
            tactics += "\nQed."
        return tactics, f"{problem.formal_statement.rstrip()}\nProof.\n{tactics}\n"

    def proof_steps(self, proof: str, statement: str) -> list[tuple[int, str]] | None:
        """Coq's sentences; a restated statement that differs is an error on it, so it is never stepped past."""
        from .sentences import SplitError, split_sentences

        try:
            sentences = split_sentences(proof)
        except SplitError:
            return None
        restated = " ".join(statement.split())
        return [
            (s.end, s.text)
            for k, s in enumerate(sentences)
            if not ((k == 0 and " ".join(s.text.split()) == restated) or s.text.startswith(("Proof", "Qed", "Defined")))
        ]

    def normalize_tactic(self, tactic: str) -> str:
        """Whitespace collapsed, and the sentence's final period added."""
        t = " ".join(tactic.split())
        return t + "." if t and not t.endswith(".") else t

    def refusal(self, tactic: str) -> str | None:
        """What ``CoqProver.step`` refuses itself, asked without a prover call
        (:func:`proofrl.provers.coq.rules.forbidden_reason`: every command, ``Abort``, ``admit``, ``give_up``;
        :func:`proofrl.provers.coq.prover.unchecked_reason`: ``exact_no_check`` and the rest of the
        ``*_no_check`` family), and bullets / braces, which the search manages itself."""
        if why := super().refusal(tactic):
            return why
        if self.is_structural(tactic) or _BRACES.fullmatch(tactic):
            return "forbidden: bullets and braces are managed by the search"
        from .prover import unchecked_reason
        from .rules import forbidden_reason

        return forbidden_reason(tactic.strip()) or unchecked_reason(tactic)

    def is_structural(self, tactic: str) -> bool:
        """A bullet or a brace (also ``[x]: {``, ``all: {``)."""
        from .sentences import is_structural

        return is_structural(tactic.strip())

    def decomposable(self, state: ProofState) -> bool:
        """Several goals and no existential variable in any (nor a shelved goal)."""
        return len(state.goals) > 1 and not mentions_evar(state)

    def focus_tactic(self, i: int) -> str:
        return f"{i}: {{"

    def and_node_lines(self, blocks: Sequence[Sequence[str]]) -> list[str]:
        """Each goal's sentences as a ``{ … }`` block; a block focuses the first remaining goal."""
        return [line for lines in blocks for line in ("{", *lines, "}")]
