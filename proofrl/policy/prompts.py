"""Prompt formats of published provers, their Coq counterparts, and how a proof is read out of a completion.

Two kinds:

* **completion** formats (DeepSeek-Prover-V1.5, arXiv:2408.08152 §2.1, and "coq", "coq-cot"): the prompt
  opens a code block and ends inside the theorem; the model continues the code and closes the block. The proof
  is the statement (plus ``Proof.`` for Coq) followed by the completion cut at the first stop string
  (`````), and for Coq also just after the first ``Qed.``/``Defined.``/``Admitted.`` outside comments and
  strings (anything a model adds after the proof would be refused as a command).
* **chat** formats (Kimina-Prover, kimina-prover-rl's ``recipe/kimina_prover_rl``): system + user messages;
  the model thinks in ``<think>…</think>`` and then writes the whole theorem in a fenced block. The proof is
  the last ```` ```lean4 ```` (``coq``) block after ``</think>`` (anywhere when there is no ``</think>``: the
  format reward, not extraction, judges the structure). An unclosed block gives no proof.

What ``extract`` returns is what the provers' ``check(problem.theorem, proof)`` accepts: a restated
statement followed by the proof (Coq's plan strips ``Proof.``/``Qed.``; Lean's assembler finds the statement
in the text). The problem's header is never part of it — Coq refuses ``Require`` inside a proof — so header
lines a chat model repeats at the top of its block are dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..problems import Problem
from ..provers.backend import get_backend

FENCE = "```"
_DOC = re.compile(r"^\s*/-[-!]?(.*?)-/\s*$", re.S)
_IM_START, _IM_END = "<|im_start|>", "<|im_end|>"


def _nl(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


def informal_text(problem: Problem) -> str:
    """The natural-language statement: ``informal_prefix`` without its ``/-- … -/`` (or ``extra["informal"]``)."""
    raw = problem.informal_prefix.strip() or str(problem.extra.get("informal", "")).strip()
    m = _DOC.match(raw)
    return (m.group(1) if m else raw).strip()


def _block(text: str, lang: str) -> str | None:
    """Content of the last closed ```lang block in ``text``; None if there is none."""
    blocks = re.findall(rf"```{lang}[ \t]*\n(.*?)```", text, re.S)
    return blocks[-1] if blocks else None


def _chatml(messages: list[dict[str, str]]) -> str:
    """ChatML, the template of Qwen-based provers (Kimina), for endpoints that take raw text."""
    turns = "".join(f"{_IM_START}{m['role']}\n{m['content']}{_IM_END}\n" for m in messages)
    return turns + f"{_IM_START}assistant\n"


def render_messages(messages: list[dict[str, str]], tokenizer: Any = None) -> str:
    """Chat messages as the text to sample from: ``tokenizer``'s chat template when it has one, else ChatML."""
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return _chatml(messages)


@dataclass(frozen=True)
class PromptFormat:
    name: str
    backend: str  # "lean" | "coq"
    chat: bool
    stop: tuple[str, ...]
    instruction: str = ""
    """completion formats: the sentence before the code block; chat formats: the user message's first line"""
    system: str = ""
    """chat formats: the system message"""

    @property
    def lang(self) -> str:
        return get_backend(self.backend).fence

    def _check(self, problem: Problem) -> None:
        if problem.backend != self.backend:
            raise ValueError(
                f"format {self.name!r} is for {self.backend} problems; {problem.name!r} is {problem.backend}"
            )

    def code_prefix(self, problem: Problem) -> str:
        """Completion formats: the code the prompt ends with, which the completion continues."""
        return get_backend(self.backend).completion_prefix(problem)

    def messages(self, problem: Problem) -> list[dict[str, str]] | None:
        if not self.chat:
            return None
        self._check(problem)
        informal = informal_text(problem)
        user = self.instruction + "\n\n"
        if informal:  # Coq stdlib theorems have no informal statement: the section is left out
            user += f"# Problem:\n{informal}\n\n"
        user += f"# Formal Statement:\n```{self.lang}\n{_nl(problem.header)}{_nl(problem.formal_statement)}```\n"
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]

    def prompt(self, problem: Problem, tokenizer: Any = None) -> str:
        """The text to sample from: chat formats through ``tokenizer``'s chat template when it has one,
        else ChatML; completion formats as plain text."""
        self._check(problem)
        if not self.chat:
            return f"{self.instruction}\n\n```{self.lang}\n{self.code_prefix(problem)}"
        return render_messages(self.messages(problem), tokenizer)  # type: ignore[arg-type]

    def extract(self, problem: Problem, completion: str) -> str | None:
        """The proof to pass to ``ProverPool.check(problem.theorem, proof)``; None if there is none."""
        self._check(problem)
        if self.chat:
            after = completion.rsplit("</think>", 1)[-1]
            code = _block(after, self.lang)
            if code is None:
                return None
            code = get_backend(self.backend).proof_from_answer(problem, code)
            return code if code.strip() else None
        body = completion
        for s in self.stop:
            body = body.split(s, 1)[0]
        return get_backend(self.backend).proof_from_completion(problem, body)

    def completion(self, problem: Problem, proof: str, *, reasoning: str = "") -> str:
        """The completion that writes ``proof`` in this format (``extract`` gives the proof back): targets for
        supervised warm-up and for tests. ``proof`` is the tactic script (Coq: with or without
        ``Proof.``/``Qed.``; Lean: the text after ``:= by``)."""
        self._check(problem)
        continuation, code = get_backend(self.backend).completion_code(problem, proof)
        if not self.chat:
            return f"{continuation}\n{FENCE}"
        return f"<think>\n{reasoning}\n</think>\n```{self.lang}\n{code}```"


_KIMINA_SYSTEM = "You are an expert in mathematics and proving theorems in {}."
_KIMINA_USER = "Think about and solve the following problems step by step in {}."

FORMATS: dict[str, PromptFormat] = {
    f.name: f
    for f in (
        PromptFormat("deepseek-v1.5", "lean", False, (FENCE,), "Complete the following Lean 4 code:"),
        PromptFormat(
            "deepseek-v1.5-cot",
            "lean",
            False,
            (FENCE,),
            "Complete the following Lean 4 code with explanatory comments preceding each line of code:",
        ),
        PromptFormat("kimina", "lean", True, (), _KIMINA_USER.format("Lean 4"), _KIMINA_SYSTEM.format("Lean 4")),
        PromptFormat("coq", "coq", False, (FENCE,), "Complete the following Coq proof:"),
        PromptFormat(
            "coq-cot",
            "coq",
            False,
            (FENCE,),
            "Complete the following Coq proof with explanatory comments preceding each tactic:",
        ),
        PromptFormat("kimina-coq", "coq", True, (), _KIMINA_USER.format("Coq"), _KIMINA_SYSTEM.format("Coq")),
    )
}


def get_format(name: str) -> PromptFormat:
    if name not in FORMATS:
        raise ConfigError(f"unknown prompt format {name!r}; choose one of {list(FORMATS)}")
    return FORMATS[name]
