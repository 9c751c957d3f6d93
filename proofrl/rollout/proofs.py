"""Sample whole proofs and have the prover judge them: the step shared by the trainer and ``proofrl eval``.

Overlapped (``overlap=True``): prompts are generated in chunks; each chunk's proofs go to the verifier (a
background thread over the prover pool or a server) while the next chunk is generated, so verification hides
behind generation. The timings say how much did: ``hidden = 1 − wait / verify_busy``, where ``wait`` is how
long the caller still waited for verdicts after the last chunk was generated. Serial (``overlap=False``): every
prompt in one generation call, then every proof to the verifier at once.

The trainer runs serial unless ``rollout.overlap`` is true: measured side by side with
``benchmarks/rl_step.py`` on 2 CPU cores (docs/training.md, "Where a step's time goes"), serial was faster both
for the demo recipe and where generation is much slower than verification. Overlapping shrinks each
generation call to a chunk, and on a shared CPU the sampler and the provers compete for the same cores. The schedule is
fixed per run, not chosen from each step's timings: it changes what is sampled (each generation call is seeded, and
batches differ), so a timing-driven choice would make a seeded run irreproducible.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..policy.generation import Completion, Generator, SamplingConfig
from ..policy.prompts import PromptFormat
from ..problems import Problem
from ..provers.base import Verdict
from ..verification import Verifier


@dataclass(frozen=True)
class PromptItem:
    """One prompt to sample a group from: a problem's first turn, or an error-correction second turn."""

    problem: Problem
    prompt: str
    """the text given to the generator (chat formats already rendered)"""
    turn: int = 1
    messages: Any = None
    """the chat messages or plain first prompt this text was rendered from (the error-correction turn extends it)"""


@dataclass
class Group:
    """G samples for one prompt, with their proofs, verdicts and (filled by the caller) rewards."""

    item: PromptItem
    completions: list[Completion]
    proofs: list[str | None]
    verdicts: list[Verdict] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)

    @property
    def correct(self) -> list[bool]:
        return [v.valid for v in self.verdicts]


@dataclass
class RolloutTimings:
    generate_s: float = 0.0
    verify_busy_s: float = 0.0
    """summed wall time the verifier spent on this step's chunks"""
    verify_wait_s: float = 0.0
    """time spent waiting for verdicts after generation ended"""
    tokens: int = 0
    samples: int = 0
    verified: int = 0
    """distinct (problem, proof) pairs sent to the verifier (repeated samples are judged once)"""

    @property
    def hidden_fraction(self) -> float:
        """Share of verification that overlapped generation (1 = fully hidden)."""
        if self.verify_busy_s <= 0:
            return 1.0
        return max(0.0, min(1.0, 1.0 - self.verify_wait_s / self.verify_busy_s))

    def to_json(self) -> dict[str, float]:
        return {
            "time/generate_s": self.generate_s,
            "time/verify_busy_s": self.verify_busy_s,
            "time/verify_wait_s": self.verify_wait_s,
            "time/verify_hidden": self.hidden_fraction,
            "gen/tokens": self.tokens,
            "verify/distinct": self.verified,
            "gen/tokens_per_s": self.tokens / self.generate_s if self.generate_s > 0 else 0.0,
        }


def first_turn(problem: Problem, fmt: PromptFormat, tokenizer: Any = None) -> PromptItem:
    messages = fmt.messages(problem) if fmt.chat else None
    text = fmt.prompt(problem, tokenizer)
    return PromptItem(problem, text, 1, messages if messages is not None else text)


def _stamp(done: dict[int, float], chunk: int, _future: Future) -> None:
    """Note when ``chunk``'s verdicts were ready (the first time only)."""
    done.setdefault(chunk, time.perf_counter())


def sample_and_verify(
    generator: Generator,
    items: Sequence[PromptItem],
    params: SamplingConfig,
    fmt: PromptFormat,
    verifier: Verifier,
    *,
    chunk_prompts: int = 4,
    overlap: bool = True,
    on_chunk: Callable[[int], None] | None = None,
) -> tuple[list[Group], RolloutTimings]:
    """Generate ``params.n`` completions per item, extract proofs and verify them: overlapped (chunks of
    ``chunk_prompts`` prompts, each verified while the next is generated) or serial (``overlap=False``: one
    generation call, then one verification of everything)."""
    timings = RolloutTimings()
    groups: list[Group] = []
    pending: list[tuple[list[Group], Future[list[Verdict]], float, list[int]]] = []
    done: dict[int, float] = {}  # chunk → when its verdicts were ready (set from the verifier's thread)

    chunk = max(1, chunk_prompts if overlap else len(items))
    for start in range(0, len(items), chunk):
        part = items[start : start + chunk]
        t0 = time.perf_counter()
        outs = generator.generate([it.prompt for it in part], params)
        timings.generate_s += time.perf_counter() - t0
        new: list[Group] = []
        for it, comps in zip(part, outs, strict=True):
            proofs = [fmt.extract(it.problem, c.text) for c in comps]
            new.append(Group(it, list(comps), proofs))
            timings.tokens += sum(len(c.token_ids) for c in comps)
            timings.samples += len(comps)
        submitted = time.perf_counter()
        # Sampled proofs repeat (a group of G often holds the same proof several times): judge each once.
        index: dict[tuple[str, str | None], int] = {}
        unique: list[tuple[Problem, str | None]] = []
        where = []
        for g in new:
            for proof in g.proofs:
                key = (g.item.problem.key, proof)
                if key not in index:
                    index[key] = len(unique)
                    unique.append((g.item.problem, proof))
                where.append(index[key])
        future = verifier.submit(unique)
        future.add_done_callback(partial(_stamp, done, len(pending)))
        timings.verified += len(unique)
        pending.append((new, future, submitted, where))
        groups.extend(new)
        if on_chunk:
            on_chunk(len(part))
    gen_end = time.perf_counter()
    previous = 0.0
    for i, (new, future, submitted, where) in enumerate(pending):
        verdicts = future.result()
        finished = done.setdefault(i, time.perf_counter())  # the callback may not have run yet
        # The verifier takes chunks one at a time: chunk i is worked on from its submission or the end of
        # chunk i−1, whichever is later, until its verdicts are ready.
        timings.verify_busy_s += max(0.0, finished - max(submitted, previous))
        previous = finished
        slots = iter(where)
        for g in new:
            g.verdicts = [verdicts[next(slots)] for _ in g.proofs]
    timings.verify_wait_s = time.perf_counter() - gen_end
    return groups, timings
