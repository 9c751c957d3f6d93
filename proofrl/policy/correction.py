"""kimina-prover-rl's error-correction turn: a failed proof and the prover's messages become a second-turn prompt.

1. :func:`build_feedback` turns a verdict into the feedback text kimina's models were trained on: the first
   3 error-severity messages, each as ``# Error i:`` with the goals before the error (when known), the
   message, and the proof's lines ±2 around it, numbered ``%03d`` with `` >`` on the error line. A verdict
   without error messages (a process-level timeout, an incomplete proof, ``admitted``) gets one
   ``# System Error:`` section instead. Feedback longer than 3000 characters is dropped (None), not cut.
2. :func:`goals_before_errors` supplies the goals: kimina reads them from Lean's infotree; for Coq we replay
   the proof sentence by sentence in a leased prover up to the sentence holding each error.
3. :func:`second_turn_prompt` appends the failed completion and the feedback to the first prompt: chat
   ``[system, user, assistant(previous), user(feedback)]``, or a plain-text block for completion models.
4. :class:`CorrectionCache` keeps the last 5000 second-turn prompts and mixes them into batches with
   probability 0.5 per slot; :func:`prompt_tokens_ok` drops prompts longer than 8192 tokens.

The second turn's prompt sits beside the first turn's formats (:mod:`.prompts`): the whole-proof trainer
(:mod:`proofrl.train.whole_proof`) and verl's agent loop (:mod:`proofrl.verl.agent_loop`) build it the same way.
Defaults are kimina-prover-rl's (its published RL recipe). Coq stops at the first error of a proof, so Coq
feedback has one ``# Error`` section at most; Lean can report several.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar, overload

from ..errors import ProofrlError
from ..problems import Problem
from ..provers.backend import backend_of_prover
from ..provers.base import Message, Position, Verdict
from ..provers.pool import ProverPool

T = TypeVar("T")

# The section titles of kimina-prover-rl's tool message, kept word for word: Kimina-Prover models were
# trained on second turns that read exactly like this.
GOALS_TITLE = "Goals state before error position:"
MESSAGE_TITLE = "Error message:"
SNIPPET_TITLE = {"lean": "Lean 4 code snippet with error:", "coq": "Coq code snippet with error:"}
FENCE = {"lean": "lean4", "coq": "coq"}


def build_feedback(
    proof: str,
    verdict: Verdict,
    *,
    goals_before: Sequence[str | None] | None = None,
    max_errors: int = 3,
    context_lines: int = 2,
    max_chars: int = 3000,
    backend: str = "",
) -> str | None:
    """The feedback text for a failed ``proof`` (the text that was checked; message positions are in it).

    ``goals_before[i]`` belongs to the i-th error-severity message (see :func:`goals_before_errors`).
    ``backend`` picks the snippet's language; empty: from ``verdict.prover`` (Coq unless it says Lean).
    Returns None for a valid verdict, and when the text would be longer than ``max_chars``.
    """
    if verdict.valid:
        return None
    backend = backend or backend_of_prover(verdict.prover)
    errors = [m for m in verdict.messages if m.severity == "error"][:max_errors]
    lines = proof.split("\n")
    sections = []
    for i, m in enumerate(errors):
        goals = goals_before[i] if goals_before is not None and i < len(goals_before) else None
        sections.append(_error_section(i + 1, m, goals, lines, context_lines, backend))
    if not sections:
        sections.append(_system_section(verdict))
    text = "\n".join(sections)
    return None if len(text) > max_chars else text


def _error_section(index: int, m: Message, goals: str | None, lines: list[str], context: int, backend: str) -> str:
    out = f"# Error {index}:\n"
    if goals:
        out += f"{GOALS_TITLE}\n{goals.strip()}\n\n"
    out += f"{MESSAGE_TITLE}\n{m.text.strip()}\n\n"
    if m.start is not None and 1 <= m.start.line <= len(lines):
        at = m.start.line
        numbered = [
            f"{n:03d}{' >' if n == at else '  '}| {lines[n - 1]}"
            for n in range(max(1, at - context), min(len(lines), at + context) + 1)
        ]
        out += (
            f"{SNIPPET_TITLE.get(backend, 'Code snippet with error:')}\n```{FENCE.get(backend, '')}\n"
            + "\n".join(numbered)
            + "\n```\n"
        )
    return out


def _system_section(verdict: Verdict) -> str:
    why = "; ".join(verdict.reasons) or "not accepted"
    out = f"# System Error:\n{MESSAGE_TITLE}\n{verdict.status.value}: {why}\n"
    left = [m.text.strip() for m in verdict.messages if m.severity == "info" and m.text.strip()]
    if left:  # Coq lists the goals an incomplete proof leaves open as info messages
        out += "\nUnsolved goals:\n" + "\n\n".join(left) + "\n"
    return out


# -- goals before each error (Coq) ----------------------------------------------------------------------
def goals_before_errors(
    pool: ProverPool, problem: Problem, proof: str, verdict: Verdict, *, timeout: float = 10.0
) -> list[str | None]:
    """The pretty goals just before each error-severity message of ``verdict`` (None where unreachable).

    Coq: lease a prover for the problem's header, ``start`` the theorem and ``step`` the proof's sentences up
    to the one holding each error (a restated statement, ``Proof``, ``Qed`` are skipped), all within
    ``timeout`` seconds. Errors without a position, a proof that does not split, a step that fails early or
    time running out give None. Lean: None for each error (kimina reads Lean's goals from the infotree,
    which verdicts do not carry).
    """
    errors = [m for m in verdict.messages if m.severity == "error"]
    out: list[str | None] = [None] * len(errors)
    if not errors:
        return out
    from ..provers.backend import get_backend

    sentences = get_backend(problem.backend).proof_steps(proof, problem.formal_statement)
    if sentences is None:
        return out
    wanted = sorted((_offset(proof, m.start), i) for i, m in enumerate(errors) if m.start is not None)
    if not wanted:
        return out
    deadline = time.monotonic() + timeout
    try:
        with pool.lease(problem.header) as prover:
            state = prover.start(problem.theorem, timeout=timeout)
            k = 0  # sentences[:k] have been stepped
            for offset, i in wanted:
                while k < len(sentences) and sentences[k][0] <= offset:
                    s = sentences[k][1]
                    k += 1
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return out
                    step = prover.step(state, s, timeout=left)
                    if not step.ok or step.state is None:
                        return out
                    state = step.state
                out[i] = str(state)
    except ProofrlError:  # the statement does not start, the process died: no goals, not an exception
        pass
    return out


def _offset(text: str, p: Position) -> int:
    lines = text.split("\n")
    return sum(len(line) + 1 for line in lines[: p.line - 1]) + p.column


# -- the second turn ------------------------------------------------------------------------------------
PLAIN_FEEDBACK = (
    "\n\nThe proof above was not accepted. The proof assistant reported:\n\n{feedback}\nWrite a corrected proof.\n\n"
    "{reopen}"
)
"""The plain-text second turn, after the first prompt and the failed completion (closed with ```` ``` ```` when
it left its code block open). ``{reopen}`` repeats the code block the first prompt ended in (e.g.
```` ```lean4 ```` + header + statement), so a completion model writes a fresh proof right where it did before."""


@overload
def second_turn_prompt(first_prompt: str, completion: str, feedback: str) -> str: ...
@overload
def second_turn_prompt(first_prompt: list[dict], completion: str, feedback: str) -> list[dict]: ...
def second_turn_prompt(first_prompt: str | list[dict], completion: str, feedback: str) -> str | list[dict]:
    """The prompt for the correction turn (kimina: the conversation plus ``assistant`` and ``user`` turns).

    Chat (a list of ``{"role", "content"}``): ``[*first_prompt, assistant(completion), user(feedback)]``.
    Plain text: ``first_prompt + completion`` (its code block closed) + :data:`PLAIN_FEEDBACK`.
    """
    if isinstance(first_prompt, str):
        text = first_prompt + completion
        if text.count("```") % 2:
            text += "\n```"
        reopen = first_prompt[first_prompt.rfind("```") :] if first_prompt.count("```") % 2 else ""
        return text + PLAIN_FEEDBACK.format(feedback=feedback.rstrip("\n") + "\n", reopen=reopen)
    if not isinstance(first_prompt, list) or not all(
        isinstance(m, Mapping) and "role" in m and "content" in m for m in first_prompt
    ):
        raise TypeError("first_prompt must be a string or a list of {'role', 'content'} messages")
    return [
        *(dict(m) for m in first_prompt),
        {"role": "assistant", "content": completion},
        {"role": "user", "content": feedback},
    ]


def prompt_tokens_ok(prompt: str | list[dict], tokenizer: Any, max_tokens: int = 8192) -> bool:
    """True when the prompt fits in ``max_tokens`` (kimina drops longer second turns rather than cut them).
    A chat is counted through the tokenizer's chat template with the generation prompt; text as the trainer
    encodes it (with special tokens)."""
    if isinstance(prompt, str):
        ids = tokenizer(prompt, add_special_tokens=True)["input_ids"]
    else:
        ids = tokenizer.apply_chat_template(prompt, tokenize=True, add_generation_prompt=True)
        if isinstance(ids, Mapping) or hasattr(ids, "input_ids"):  # newer transformers return an encoding
            ids = ids["input_ids"]
    return len(ids) <= max_tokens


class CorrectionCache(Generic[T]):
    """The last ``max_size`` second-turn items, mixed into batches (kimina: 5000 kept, rate 0.5).

    :meth:`mix` fills each of ``k`` slots from the cache with probability ``rate`` (when it holds anything;
    a uniformly drawn item, which stays in the cache, as kimina's does), else with the next fresh item.
    Thread-safe: verification callbacks may :meth:`add` while the trainer mixes.
    """

    def __init__(self, max_size: int = 5000, rate: float = 0.5, seed: int = 0):
        if max_size < 1 or not 0.0 <= rate <= 1.0:
            raise ValueError(f"need max_size >= 1 and 0 <= rate <= 1, got {max_size}, {rate}")
        self.max_size, self.rate = max_size, rate
        self._items: deque[T] = deque(maxlen=max_size)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def add(self, item: T) -> None:
        with self._lock:
            self._items.append(item)

    def mix(self, fresh: Sequence[T], k: int) -> list[T]:
        """``k`` items: cache draws where the coin says so, fresh items in order elsewhere. ``fresh`` must hold
        at least ``k`` items (those not needed are left out)."""
        if k < 0 or len(fresh) < k:
            raise ValueError(f"need 0 <= k <= len(fresh); got k={k}, {len(fresh)} fresh items")
        out: list[T] = []
        nxt = 0
        with self._lock:
            for _ in range(k):
                if self._items and self._rng.random() < self.rate:
                    out.append(self._items[self._rng.randrange(len(self._items))])
                else:
                    out.append(fresh[nxt])
                    nxt += 1
        return out

    def __len__(self) -> int:
        return len(self._items)

    def state_dict(self) -> dict[str, Any]:
        """The items and the random state, for a checkpoint (items must be picklable to save it)."""
        with self._lock:
            return {
                "items": list(self._items),
                "rng": self._rng.getstate(),
                "max_size": self.max_size,
                "rate": self.rate,
            }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        with self._lock:
            self._items = deque(state["items"], maxlen=self.max_size)
            self._rng.setstate(state["rng"])
