"""The tactic model's retrieved context: what the memory remembers near a state, written into the model's prompt.

* **The idea** (Rango: the project's own proofs retrieved by BM25 at every step, +47 % relative; ReProver:
  retrieved premises prepended to the state). A small model cannot hold a library in its weights; handed the
  tactics taken at the nearest remembered states and the names of the lemmas whose statements are nearest, it
  can copy, adapt and combine them (``rewrite H`` where the neighbour wrote ``rewrite H0``, a retrieved lemma
  inside ``apply``). The k-NN source (:mod:`proofrl.policy.memory`) applies the neighbours' tactics as they
  are; this is the same retrieval read by a model.
* **What is retrieved** (:class:`Retriever`): the distinct tactics of the :attr:`ContextShape.tactics` nearest
  states of a :class:`~proofrl.policy.memory.ProofMemory`, and the qualified names of the
  :attr:`ContextShape.premises` nearest lemma statements of a premise memory
  (:class:`~proofrl.policy.premises.PremisePolicy`'s), most similar first. ``exclude`` leaves out a theorem's
  own pairs and its own name: a model is taught on a library's proofs with each proof's own steps hidden from its
  context, as the search will never find the proof it is looking for in its memory.
* **The prompt** (:func:`~proofrl.policy.tactic.tactic_prompt`): ``[TACTICS]`` and ``[PREMISES]`` blocks, one
  entry a line, before ReProver's ``[GOAL]``/``[PROOFSTEP]``.
* **A model taught with context** says so in its folder (``retrieval.json``: the shape it was taught with,
  :func:`taught_shape`); :func:`~proofrl.policy.tactic.make_tactic_policy` hands it the memory of the spec's
  k-NN source (``knn:DIR+hf:MODEL``) and refuses, in one line, a spec that gives it none.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError

if TYPE_CHECKING:
    from .memory import ProofMemory

CONTEXT_FILE = "retrieval.json"
TACTICS_TAG, PREMISES_TAG = "[TACTICS]", "[PREMISES]"


@dataclass(frozen=True)
class ContextShape:
    """How much context a prompt holds (the tiny model's 1,024 positions: a tactic is about 10 tokens)."""

    tactics: int = 4
    """distinct tactics of the nearest remembered states"""
    premises: int = 4
    """qualified names of the nearest lemma statements"""


@dataclass(frozen=True)
class Context:
    """What the prompt shows before the state."""

    tactics: tuple[str, ...] = ()
    premises: tuple[str, ...] = ()

    def text(self) -> str:
        """The blocks as the prompt writes them (empty for an empty context)."""
        out = []
        if self.tactics:
            out += [TACTICS_TAG, *self.tactics]
        if self.premises:
            out += [PREMISES_TAG, *self.premises]
        return "".join(line + "\n" for line in out)


class Retriever:
    """The context of a state (module docstring): tactics from ``memory``, premise names from ``premises`` (a
    memory whose "state" is a lemma's statement and "tactic" its qualified name). Either may be None. Retrieval
    that fails gives an empty context and is counted in ``failures``: a search never fails because of it."""

    def __init__(
        self, memory: ProofMemory | None, premises: ProofMemory | None = None, shape: ContextShape | None = None
    ):
        self.memory, self.premises, self.shape = memory, premises, shape or ContextShape()
        self.failures = 0

    def context(self, state: str, *, exclude: str = "") -> Context:
        """The context of ``state``, leaving out the pairs of theorem ``exclude`` and a premise of that name (a
        qualified ``exclude`` also matches a short theorem name: ``Coq.Arith.X.lemma`` hides ``lemma``)."""
        short = exclude.rsplit(".", 1)[-1]
        hidden = {exclude, short} - {""}
        try:
            tactics: list[str] = []
            if self.memory is not None and self.shape.tactics:
                for n in self.memory.neighbours(state, 4 * self.shape.tactics):
                    if n.theorem not in hidden and n.tactic not in tactics:
                        tactics.append(n.tactic)
            premises: list[str] = []
            if self.premises is not None and self.shape.premises:
                for n in self.premises.neighbours(state, self.shape.premises + 1):
                    if n.tactic not in hidden and n.tactic.rsplit(".", 1)[-1] != short:
                        premises.append(n.tactic)
        except Exception:  # retrieval never sinks a search
            self.failures += 1
            return Context()
        return Context(tuple(tactics[: self.shape.tactics]), tuple(premises[: self.shape.premises]))


def save_shape(model_dir: str | Path, shape: ContextShape) -> None:
    """Record in a model's folder that it was taught with retrieved context of this shape."""
    (Path(model_dir) / CONTEXT_FILE).write_text(json.dumps(asdict(shape)))


def taught_shape(model_dir: str | Path) -> ContextShape | None:
    """The context shape a model was taught with (None: taught on the state alone). A damaged file is one line."""
    path = Path(model_dir) / CONTEXT_FILE
    if not path.is_file():
        return None
    try:
        return ContextShape(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError) as e:
        raise ConfigError(f"{path}: not a retrieval context shape ({e}); delete it or teach the model again") from None
