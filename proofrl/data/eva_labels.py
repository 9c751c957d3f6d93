"""A prover-labelled dataset for the EVA reward model: no annotators, Coq says how good each proposal is.

At states taken from the tactic transitions (:mod:`proofrl.data.tactics`), four kinds of proposal are run in
Coq: the human next step (``human``), a step taken from another theorem's state (``other``), a step naming a
lemma that does not exist (``ghost``), and the human step with its syntax broken (``broken``). The kind only
makes the proposals varied; the scores come from what Coq says alone:

* **facts**: accepted or rejected; if rejected, why (``syntax``: the parser refused it; ``unknown``: a name
  was not found; ``error``: any other error, e.g. it does not apply to this goal; ``timeout``); if accepted,
  goals before and after (Δgoals = after − before) and whether the proof is then finished — the state has no
  goal left, or a short best-first search (:class:`~proofrl.search.best_first.BestFirstSearch`, the
  search's own engine) from the resulting state finds a rest whose whole proof (human prefix, proposal,
  rest) the fresh-process final check calls ``valid``.
* **scores** (continuous, 1.0–5.0; :func:`scores_from_facts`):

  ============================  =====================  ====================  ==========================
  fact                          logic                  align                 clarity
  ============================  =====================  ====================  ==========================
  accepted, proof then closes   5.0                    5.0                   5 − min(1, len/100)
  accepted, does not close      4 − 0.5·min(Δ⁺, 2)     3.5 + 0.5·[Δ < 0]     5 − min(1, len/100)
                                                       − 0.5·[state same]
  rejected: timeout             2.0                    2.5                   4.0
  rejected: error               2.0                    1.5                   4.0
  rejected: unknown name        1.5                    2.0                   3.5
  rejected: syntax              1.0                    1.0                   1.0
  ============================  =====================  ====================  ==========================

  (Δ⁺ = max(Δgoals, 0); "state same": the step changed nothing.) Logic is "is the step right", align "does it
  fit this goal", clarity "is it a well-formed, short step".
* **critique**: the prover's own words — "Coq accepted the step: goals 2 → 1. …" or "Coq rejected the step
  (unknown name): <Coq's first message line>".
* **split**: each record keeps its transition's ``split`` (by module, :func:`proofrl.data.splits.split_by_module`),
  so a held-out module's states are never trained on.

One record (the EVA training format, :func:`proofrl.train.eva.read_records`)::

    {"state", "proposal", "critique", "scores": {"logic", "align", "clarity"}, "kind", "facts", "theorem",
     "module", "split", "step"}

Run: ``python -m proofrl.data.eva_labels --transitions DIR/train.jsonl --transitions DIR/held-out.jsonl
--out OUT --policy hf:MODEL`` writes ``OUT/train.jsonl``, ``OUT/held-out.jsonl``, ``OUT/summary.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ProofrlError
from ..provers.backend import goal_count, state_text
from ..provers.base import FailureKind, Theorem
from ..search.config import SearchConfig

KINDS = ("human", "other", "ghost", "broken")


@dataclass(frozen=True)
class Facts:
    """What Coq said about one proposal."""

    accepted: bool
    reason: str = ""
    """rejected: ``syntax`` | ``unknown`` | ``error`` | ``timeout``"""
    message: str = ""
    goals_before: int = 0
    goals_after: int = 0
    same_state: bool = False
    closes: bool = False

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _rejection(kind: FailureKind, message: str) -> str:
    if kind is FailureKind.TIMEOUT:
        return "timeout"
    if kind is FailureKind.PARSE_ERROR or re.search(r"syntax error|lexer|unterminated|illegal begin", message, re.I):
        return "syntax"
    if re.search(
        r"was not found|not found in the current environment|unknown (reference|constant|identifier)|"
        r"not a defined object|no such",
        message,
        re.I,
    ):
        return "unknown"
    return "error"


def scores_from_facts(f: Facts, proposal: str) -> dict[str, float]:
    """The table of the module docstring."""
    clarity = 5.0 - min(1.0, len(proposal.strip()) / 100.0)
    if f.accepted:
        if f.closes:
            return {"logic": 5.0, "align": 5.0, "clarity": clarity}
        delta = f.goals_after - f.goals_before
        logic = 4.0 - 0.5 * min(max(delta, 0), 2)
        align = 3.5 + 0.5 * (delta < 0) - 0.5 * f.same_state
        return {"logic": logic, "align": align, "clarity": clarity}
    return {
        "timeout": {"logic": 2.0, "align": 2.5, "clarity": 4.0},
        "error": {"logic": 2.0, "align": 1.5, "clarity": 4.0},
        "unknown": {"logic": 1.5, "align": 2.0, "clarity": 3.5},
        "syntax": {"logic": 1.0, "align": 1.0, "clarity": 1.0},
    }[f.reason]


def critique_from_facts(f: Facts) -> str:
    if not f.accepted:
        first = f.message.strip().splitlines()[0] if f.message.strip() else "no message"
        return f"Coq rejected the step ({f.reason}): {first[:140]}"
    text = f"Coq accepted the step: goals {f.goals_before} -> {f.goals_after}."
    if f.same_state:
        text += " It changed nothing."
    return text + (" The proof then closes (checked by coqc)." if f.closes else " The proof is not closed after it.")


def ghost_step(theorem: str, rng: random.Random) -> str:
    """A step naming a lemma that does not exist (the name is built so no library has it)."""
    verb = rng.choice(["apply", "rewrite", "exact"])
    return f"{verb} {re.sub(r'[^A-Za-z0-9_]', '_', theorem)}_proofrl_ghost{rng.randint(0, 99)}."


def broken_step(tactic: str) -> str:
    """The tactic with an unclosed parenthesis before its final period: Coq's parser refuses it."""
    body = tactic.strip().rstrip(".")
    return f"{body} (."


class _FromState:
    """A prover whose ``start`` is a given state, so the search engine runs from the middle of a proof; its
    final check checks the whole proof (the state's tactic path, then the rest the search found)."""

    def __init__(self, prover: Any, state: Any):
        self.prover, self.state = prover, state

    def start(self, theorem: Theorem, *, timeout: float | None = None) -> Any:
        return self.state

    def step(self, state: Any, tactic: str, *, timeout: float | None = None) -> Any:
        return self.prover.step(state, tactic, timeout=timeout)

    def final_check(self, theorem: Theorem, tactics: Sequence[str], *, timeout: float | None = None) -> Any:
        return self.prover.final_check(theorem, [*self.state.tactics, *tactics], timeout=timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.prover, name)


STEP_TIMEOUT = 5.0
"""seconds a proposal or a replayed human step may run"""


LABEL_SEARCH = SearchConfig(
    algorithm="best-first",
    width=4,
    max_steps=2,
    seconds=30.0,
    tactic_timeout=STEP_TIMEOUT,
)
"""the short best-first search from an accepted step's state (the ``eva`` recipe's ``search`` section)"""


def _closes(prover: Any, theorem: Theorem, state: Any, policy: Any, search: SearchConfig | None) -> bool:
    if state.solved:
        from ..search.final_check import final_verdict

        return final_verdict(prover, theorem, list(state.tactics), timeout=60.0).valid
    if policy is None or search is None:
        return False
    from ..search.best_first import BestFirstSearch

    r = BestFirstSearch(_FromState(prover, state), policy, search).run(theorem)
    return r.status == "proved"  # the fresh-process final check of the whole proof said valid


def label_theorem(
    prover: Any,
    steps: Sequence[dict[str, Any]],
    pick: Sequence[int],
    others: Sequence[str],
    policy: Any,
    search: SearchConfig | None = None,
    *,
    step_timeout: float = STEP_TIMEOUT,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Replay one theorem's human steps; at each picked step, run the four proposals and label them. ``search``
    (with ``policy``) decides whether an accepted step's state still closes; None: only "no goals" closes."""
    first = steps[0]
    theorem = Theorem(first["theorem"], first["statement"], first["header"])
    rng = random.Random(f"{seed}:{first['theorem']}")
    state = prover.start(theorem, timeout=step_timeout)
    out = []
    for i, t in enumerate(steps):
        if i in pick:
            proposals = {
                "human": t["tactic"],
                "other": rng.choice(others) if others else "auto.",
                "ghost": ghost_step(t["theorem"], rng),
                "broken": broken_step(t["tactic"]),
            }
            for kind, prop in proposals.items():
                r = prover.step(state, prop, timeout=step_timeout)
                if r.ok and r.state is not None:
                    facts = Facts(
                        True,
                        goals_before=goal_count(state),
                        goals_after=goal_count(r.state),
                        same_state=r.state.fingerprint == state.fingerprint,
                        closes=_closes(prover, theorem, r.state, policy, search),
                    )
                else:
                    if r.failure is not None and r.failure.kind is FailureKind.CRASH:
                        continue  # a crash says nothing about the proposal
                    msg = r.failure.message if r.failure else "no state"
                    facts = Facts(
                        False,
                        _rejection(r.failure.kind if r.failure else FailureKind.ERROR, msg),
                        msg[:500],
                        goals_before=goal_count(state),
                    )
                out.append(
                    {
                        "state": state_text(state),
                        "proposal": prop,
                        "critique": critique_from_facts(facts),
                        "scores": scores_from_facts(facts, prop),
                        "kind": kind,
                        "facts": facts.to_json(),
                        "theorem": t["theorem"],
                        "module": t["module"],
                        "split": t["split"],
                        "step": t["step"],
                    }
                )
        r = prover.step(state, t["tactic"], timeout=step_timeout)
        if not r.ok or r.state is None:
            break
        state = r.state
        if max(pick, default=-1) <= i:
            break
    return out


def build_labels(
    transitions: Sequence[dict[str, Any]],
    *,
    policy: Any = None,
    states_per_theorem: int = 2,
    search: SearchConfig | None = LABEL_SEARCH,
    step_timeout: float = STEP_TIMEOUT,
    seed: int = 0,
    theorems: int | None = None,
    workers: int = 2,
    pool: Any = None,
    console: Any = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Label proposals at states of ``transitions`` (records of :mod:`proofrl.data.tactics`), at most
    ``theorems`` theorems, ``states_per_theorem`` states each (spread over its proof); ``search`` is the short
    search from an accepted step's state (:func:`label_theorem`); returns the records and a summary (counts by
    kind, by Coq's answer, seconds).
    A theorem whose replay fails is skipped and counted; it never stops the others."""
    from ..progress import progress_bar
    from ..provers.factory import make_pool
    from ..provers.pool import PoolConfig

    t0 = time.monotonic()
    by_thm: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for t in transitions:
        by_thm[(t["module"], t["theorem"])].append(t)
    keys = list(by_thm)[:theorems] if theorems else list(by_thm)
    rng = random.Random(seed)
    jobs = []
    for key in keys:
        steps = sorted(by_thm[key], key=lambda t: t["step"])
        if [t["step"] for t in steps] != list(range(len(steps))):
            continue  # a gap: the proof cannot be replayed from these records
        cand = [i for i, t in enumerate(steps) if not t.get("structural")]
        if not cand:
            continue
        pick = sorted(rng.sample(cand, min(states_per_theorem, len(cand))))
        # "another theorem's step": a non-structural human step of a different theorem
        others = [t["tactic"] for k2 in keys if k2 != key for t in by_thm[k2] if not t.get("structural")][:400]
        jobs.append((steps, pick, rng.sample(others, min(20, len(others)))))
    if policy is not None and workers > 1 and not getattr(policy, "thread_safe", False):
        from ..search.run import LockedPolicy  # a local HF model is not thread-safe

        policy = LockedPolicy(policy, threading.Lock())
    own = pool is None
    pool = pool or make_pool("coq", pool=PoolConfig(workers=workers))
    records: list[list[dict[str, Any]]] = [[] for _ in jobs]
    failed: Counter = Counter()
    lock = threading.Lock()
    try:
        with progress_bar(transient=True, console=console) as bar:
            task = bar.add_task("labelling proposals with Coq", total=len(jobs))

            def one(j: int) -> None:
                steps, pick, others = jobs[j]
                try:
                    with pool.lease(steps[0]["header"]) as prover:
                        records[j] = label_theorem(
                            prover, steps, pick, others, policy, search, step_timeout=step_timeout, seed=seed
                        )
                except (ProofrlError, KeyError) as e:  # one theorem never sinks the batch
                    with lock:
                        failed[type(e).__name__] += 1
                with lock:
                    bar.advance(task)

            with ThreadPoolExecutor(max(1, workers)) as ex:
                list(ex.map(one, range(len(jobs))))
    finally:
        if own:
            pool.close()
    flat = [r for rs in records for r in rs]
    answers = Counter(
        ("accepted" + (", closes" if r["facts"]["closes"] else ""))
        if r["facts"]["accepted"]
        else f"rejected: {r['facts']['reason']}"
        for r in flat
    )
    summary = {
        "records": len(flat),
        "theorems": len(jobs),
        "failed_theorems": dict(failed),
        "by_kind": dict(Counter(r["kind"] for r in flat)),
        "by_answer": dict(answers),
        "by_split": dict(Counter(r["split"] for r in flat)),
        "seconds": round(time.monotonic() - t0, 2),
    }
    return flat, summary


def write_labels(
    records: Sequence[dict[str, Any]], out: str | Path, summary: dict[str, Any] | None = None
) -> dict[str, Path]:
    """``out/train.jsonl`` and ``out/held-out.jsonl`` by the records' split (and ``summary.json``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"train": out / "train.jsonl", "held-out": out / "held-out.jsonl"}
    for split, path in paths.items():
        with open(path, "w", encoding="utf-8") as f:
            for r in records:
                if r["split"] == split:
                    f.write(json.dumps(r, ensure_ascii=False) + "\n")
    if summary is not None:
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return paths


def label_splits(
    out: str | Path,
    splits: Mapping[str, tuple[str | Path, int | None]],
    *,
    policy: Any = None,
    states_per_theorem: int = 2,
    search: SearchConfig | None = LABEL_SEARCH,
    step_timeout: float = STEP_TIMEOUT,
    seed: int = 0,
    workers: int = 2,
    console: Any = None,
) -> tuple[dict[str, Path], dict[str, Any]]:
    """Label each split's transitions (``{"train": (JSONL, theorems), "held-out": …}``, :func:`build_labels`) and
    write them to ``out`` with the summary by split (:func:`write_labels`); returns the paths and the summary."""
    from .tactics import read_transitions

    records, summary = [], {}
    for split, (path, theorems) in splits.items():
        rs, summary[split] = build_labels(
            read_transitions(path),
            policy=policy,
            theorems=theorems,
            states_per_theorem=states_per_theorem,
            search=search,
            step_timeout=step_timeout,
            seed=seed,
            workers=workers,
            console=console,
        )
        records += rs
    return write_labels(records, out, summary), summary


def stdlib_labels(
    out: Path,
    *,
    theorems: int,
    held_out_theorems: int | None = None,
    policy: str = "",
    states_per_theorem: int = 2,
    search: SearchConfig | None = LABEL_SEARCH,
    step_timeout: float = STEP_TIMEOUT,
    seed: int = 0,
    workers: int = 2,
    console: Any = None,
) -> dict[str, Path]:
    """Build (once) a small prover-labelled set in ``out``: tactic transitions of the Coq stdlib's short proofs
    (``out/transitions``), then :func:`label_splits` on its train and held-out splits, ``theorems`` each
    (``held_out_theorems`` on the held-out side when given); ``policy`` (``hf:DIR``) runs ``search``, the short
    search that tells whether a proposal's state still closes."""
    paths = {"train": out / "train.jsonl", "held-out": out / "held-out.jsonl"}
    if all(p.is_file() for p in paths.values()):
        return paths
    from .tactics import build_tactic_data

    trans = out / "transitions"
    if not (trans / "train.jsonl").is_file():
        build_tactic_data(
            trans, workers=workers, max_proof_chars=200, limit=max(40, 4 * theorems), seed=seed, console=console
        )
    pol = None
    if policy:
        from ..policy.tactic import make_tactic_policy

        pol = make_tactic_policy(policy, device="cpu", seed=seed, max_tokens=64)
    return label_splits(
        out,
        {
            "train": (trans / "train.jsonl", theorems),
            "held-out": (trans / "held-out.jsonl", held_out_theorems or theorems),
        },
        policy=pol,
        states_per_theorem=states_per_theorem,
        search=search,
        step_timeout=step_timeout,
        seed=seed,
        workers=workers,
        console=console,
    )[0]


def main(argv: Sequence[str] | None = None) -> int:
    from .tactics import read_transitions

    ap = argparse.ArgumentParser(prog="python -m proofrl.data.eva_labels", description=__doc__.split("\n\n")[0])
    ap.add_argument("--transitions", action="append", required=True, help="tactic transitions JSONL (repeatable)")
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--policy", default=None, help="tactic policy for the short search (hf:DIR); none: only 'no goals' closes"
    )
    ap.add_argument("--theorems", type=int, default=None, help="label at most this many theorems per file")
    ap.add_argument("--states-per-theorem", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    policy = None
    if a.policy:
        from ..policy.tactic import make_tactic_policy

        policy = make_tactic_policy(a.policy, device="cpu", seed=a.seed, max_tokens=64)
    records, summary = [], {}
    for path in a.transitions:
        rs, s = build_labels(
            read_transitions(path),
            policy=policy,
            states_per_theorem=a.states_per_theorem,
            seed=a.seed,
            theorems=a.theorems,
            workers=a.workers,
        )
        records += rs
        summary[str(Path(path).name)] = s
    write_labels(records, a.out, summary)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
