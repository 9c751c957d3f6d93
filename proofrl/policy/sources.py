"""Tactic sources: what a source proposes (:class:`Proposal`), what a source is (:class:`TacticPolicy`), the
policy specs that name them, and policies made of several sources, each proposal naming the source that made it.

* :class:`Proposal` and :class:`TacticPolicy` are the one shape every source shares (the models of
  :mod:`proofrl.policy.tactic`, the k-NN source of :mod:`proofrl.policy.memory`, the menu below). They live here,
  in a module that imports nothing of the policy package, so that those modules import this one and never each
  other the other way round.
* :class:`MixedPolicy` pools the proposals of its sources at a state: every source proposes up to ``k`` tactics
  (so a mixture of n sources offers up to n·k, as a model plus a fixed menu does), a tactic proposed by several
  sources is one proposal with the best log-prob and every source named (``knn+hf``), and the pool is sorted
  best first. Each source's log-probs are log-probabilities of its own distribution over tactics (a model's
  sequence log-prob, the k-NN source's share of the neighbours' similarity, the menu's certain 0), so the
  search's priors and cumulative log-prob priorities compare them as they are. This is the mechanism of
  ``proofrl eval search``'s row (d), which adds Coq's automation to the model's tactics as Lean Copilot adds
  aesop's, and of Tactician-style k-NN proposals beside a language model.
* :class:`MenuPolicy` proposes the same tactics at every state at log-prob 0: the engine tries them before any
  sampled one. :func:`automation_menu` is the automation of (a) as ``intros; T.``, with the ``header`` that
  loads the libraries those tactics live in; a search adds a policy's ``header`` to every theorem's header
  (:func:`~proofrl.search.run.search_many`).
* **Specs** (:func:`spec_parts`): sources joined by ``+``, in any order: ``knn:DIR`` (a proof memory,
  :mod:`proofrl.policy.memory`), ``knn-online:DIR`` (the same, and every proof the run finds goes into it at
  once; at most one per spec), ``auto`` or ``auto:lia,easy,sauto`` (the menu), and the model specs ``hf:DIR``,
  ``vllm:DIR``, ``openai:URL``, ``openai-chat:URL``. A ``+`` splits only before a source's name, so a path
  holding ``+`` stays whole. A part that names no known source, or names no folder or URL where one is needed,
  is refused in one line naming it. :func:`proofrl.policy.tactic.make_tactic_policy` builds every spec.
* ``record_proof(theorem, steps)``: a mixture passes a found proof's (state text, tactic) steps on to each
  source that learns from them (an online memory); others ignore it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError


@dataclass(frozen=True)
class Proposal:
    """One distinct tactic: ``logprob_sum`` = log π(tactic | state) summed over its tokens (duplicates merged:
    :func:`proofrl.policy.tactic.merge_proposals`), ``logprob_mean`` = ``logprob_sum / tokens``; ``count`` samples
    gave it; ``source`` names the policy source that proposed it where several are mixed (``knn``, ``hf``,
    ``auto``), empty otherwise; ``seconds`` caps one step of it in a search (None: the search's own
    ``tactic_timeout``), for a source whose tactic is cheap when it works and slow when it fails."""

    tactic: str
    logprob_sum: float
    logprob_mean: float
    tokens: int = 0
    count: int = 1
    source: str = ""
    seconds: float | None = None


@runtime_checkable
class TacticPolicy(Protocol):
    """What a search engine calls to expand a state."""

    name: str

    def propose(self, state_text: str, k: int) -> list[Proposal]:
        """At most ``k`` distinct tactics for the state (``k`` samples, duplicates merged), best first."""
        ...


def propose_batch(policy: TacticPolicy, states: Sequence[str], k: int) -> list[list[Proposal]]:
    """:meth:`TacticPolicy.propose` for several states: one batched call where the backend has one."""
    if hasattr(policy, "propose_many"):
        return policy.propose_many(states, k)
    return [policy.propose(s, k) for s in states]


MODEL_KINDS = ("hf", "vllm", "openai", "openai-chat")
"""the model sources, built by :mod:`proofrl.policy.tactic` (its ``POLICY_KINDS``)"""

AUTOMATION = ("lia", "nia", "lra", "nra", "ring", "field", "auto", "easy", "tauto", "intuition")
"""Coq's one-shot automation for miniF2F's nat / Z / R statements (``interval`` is not packaged for 8.16)"""
AUTOMATION_HEADER = "From Coq Require Import Lia Lra Psatz Ring Field ArithRing.\n"
"""the automation's own libraries, loaded after each header: a tactic that is not loaded would make the whole
``solve [...]`` of the combination fail to parse"""
HAMMER_TACTICS_HEADER = "From Hammer Require Import Tactics.\n"
"""CoqHammer's reconstruction tactics (``sauto``), without its ATP calls"""

SOURCE_KINDS = ("knn", "knn-online", "auto")
"""the sources that are not models: a proof memory, offline or online, and the automation menu"""
SPEC_FORMS = "hf:DIR, vllm:DIR, openai:URL, openai-chat:URL, knn:DIR, knn-online:DIR, auto[:T,...]"
_SPLIT = re.compile(r"\+(?=(?:" + "|".join(re.escape(k) for k in sorted(MODEL_KINDS + SOURCE_KINDS)) + r")(?::|\+|$))")


def split_spec(spec: str) -> list[str]:
    """``knn:DIR+hf:MODEL+auto`` -> ``["knn:DIR", "hf:MODEL", "auto"]``; a ``+`` not followed by a source's name
    (inside a path) does not split."""
    return _SPLIT.split(spec)


def is_composite(spec: str) -> bool:
    """Whether ``spec`` is more than one model (several sources, or a source that is not a model)."""
    parts = split_spec(spec)
    return len(parts) > 1 or parts[0].partition(":")[0] in SOURCE_KINDS


def spec_parts(spec: str) -> list[tuple[str, str]]:
    """The ``(kind, where)`` of each source of ``spec`` (module docstring, "Specs"), in the spec's order. Raises
    :class:`~proofrl.errors.ConfigError` in one line naming the first part that is no source (an unknown kind,
    a missing folder or URL, an empty part) and when more than one part is an online memory."""
    parts = split_spec(spec)
    out: list[tuple[str, str]] = []
    for part in parts:
        kind, sep, where = part.partition(":")
        whole = f" in {spec!r}" if len(parts) > 1 else ""
        if kind not in MODEL_KINDS + SOURCE_KINDS:
            raise ConfigError(f"unknown tactic policy {part!r}{whole}; use one of {SPEC_FORMS}, or several joined by +")
        if kind != "auto" and not (sep and where):
            form = "DIR" if kind in ("hf", "vllm", "knn", "knn-online") else "URL"
            raise ConfigError(f"unknown tactic policy {part!r}{whole}: name its {form} ({kind}:{form})")
        out.append((kind, where))
    if sum(kind == "knn-online" for kind, _ in out) > 1:
        raise ConfigError(f"{spec!r}: at most one online proof memory (knn-online:DIR) per policy")
    return out


def source_name(policy: Any) -> str:
    """What a proposal of ``policy`` says made it: the policy's ``source``, else its ``name`` up to the first colon
    (``openai:prover`` -> ``openai``)."""
    return str(getattr(policy, "source", "") or str(getattr(policy, "name", type(policy).__name__)).split(":")[0])


class MenuPolicy:
    """The same ``tactics`` at every state, each at log-prob 0 (certain: the engine tries them first), in order.
    ``header``: what a theorem's header must load for them (added by the search); ``seconds``: each one's step
    cap in a search (:class:`Proposal`; None: the search's)."""

    thread_safe = True

    def __init__(self, tactics: Sequence[str], *, header: str = "", source: str = "auto", seconds: float | None = None):
        if seconds is not None and not seconds > 0:
            raise ConfigError(f"a menu's step cap must be a positive number of seconds, got {seconds}")
        self.tactics, self.header, self.source, self.seconds = tuple(tactics), header, source, seconds
        self.name = source

    def propose(self, state_text: str, k: int) -> list[Proposal]:
        return [Proposal(t, 0.0, 0.0, 1, 1, self.source, self.seconds) for t in self.tactics]


def automation_menu(tactics: Sequence[str] = AUTOMATION) -> MenuPolicy:
    """``intros; T.`` for each tactic T (of :data:`AUTOMATION`, or ``sauto``), with the header that loads them."""
    unknown = [t for t in tactics if t not in (*AUTOMATION, "sauto")]
    if unknown or not tactics:
        raise ConfigError(f"auto:{','.join(tactics)}: choose among {', '.join((*AUTOMATION, 'sauto'))}")
    header = AUTOMATION_HEADER + (HAMMER_TACTICS_HEADER if "sauto" in tactics else "")
    return MenuPolicy([f"intros; {t}." for t in tactics], header=header)


def longer_cap(a: float | None, b: float | None) -> float | None:
    """The step cap of a tactic proposed twice (:attr:`Proposal.seconds`): no cap beats any, else the longer."""
    return None if a is None or b is None else max(a, b)


def pool_proposals(groups: Sequence[tuple[str, Sequence[Proposal]]]) -> list[Proposal]:
    """``(source, proposals)`` groups -> one list, best first (ties keep source order): each proposal tagged with
    its source (unless it names one already), a tactic proposed twice kept once with the best log-prob and the
    sources joined by ``+``."""
    pooled: dict[str, Proposal] = {}
    for source, props in groups:
        for p in props:
            p = p if p.source else replace(p, source=source)
            key = " ".join(p.tactic.split())
            old = pooled.get(key)
            if old is None:
                pooled[key] = p
                continue
            names = old.source.split("+")
            merged = "+".join(names + [s for s in p.source.split("+") if s not in names])
            best = p if p.logprob_sum > old.logprob_sum else old
            pooled[key] = replace(best, tactic=old.tactic, source=merged, seconds=longer_cap(old.seconds, p.seconds))
    return sorted(pooled.values(), key=lambda p: -p.logprob_sum)


class MixedPolicy:
    """Several tactic sources asked at every state, their proposals pooled (:func:`pool_proposals`)."""

    def __init__(self, sources: Sequence[Any]):
        if not sources:
            raise ConfigError("a mixed tactic policy needs at least one source")
        self.sources = list(sources)
        self.name = "+".join(str(getattr(s, "name", type(s).__name__)) for s in self.sources)
        self.thread_safe = all(getattr(s, "thread_safe", False) for s in self.sources)
        self.header = "".join(dict.fromkeys(str(getattr(s, "header", "") or "") for s in self.sources))

    def propose(self, state_text: str, k: int) -> list[Proposal]:
        return pool_proposals([(source_name(s), s.propose(state_text, k)) for s in self.sources])

    def propose_many(self, states: Sequence[str], k: int) -> list[list[Proposal]]:
        per_source = [(source_name(s), propose_batch(s, states, k)) for s in self.sources]
        return [pool_proposals([(name, groups[i]) for name, groups in per_source]) for i in range(len(states))]

    def record_proof(self, theorem: str, steps: Sequence[tuple[str, str]]) -> None:
        for s in self.sources:
            if hasattr(s, "record_proof"):
                s.record_proof(theorem, steps)

    def close(self) -> None:
        for s in self.sources:
            if hasattr(s, "close"):
                s.close()
