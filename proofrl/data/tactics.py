"""State → tactic transitions: every human proof of the Coq standard library stepped through the prover, and
LeanDojo Benchmark's traced tactics read into the same records.

One transition (one JSONL line)::

    {"theorem", "header", "module", "statement", "split", "step", "state_before", "tactic", "state_after",
     "goals_before", "goals_after", "structural"}

* ``state_before`` / ``state_after`` are :func:`proofrl.provers.backend.state_text` of the prover's state:
  every foreground goal (hypotheses, then ``⊢ conclusion``), goals separated by a blank line, and a last line
  with the goals that are not in the foreground when there are any (``(+ 1 unfocused, 0 shelved)``);
  ``no goals`` when nothing is left. The search renders states with the same function, so the policy sees the
  text it was taught on.
* ``goals_before`` / ``goals_after`` are G(s), :func:`proofrl.provers.backend.goal_count` (foreground +
  unfocused + shelved + given up, the count LeanListener's step reward uses).
* ``structural`` marks bullets and braces (``-``, ``+``, ``{``, ``2: {``): stepped so the proof replays, kept
  in the data, and skipped by default when a tactic model is taught (a search focuses goals itself).
* ``split`` is ``train`` or ``held-out``: the module's side as every stdlib set has it
  (:func:`~proofrl.data.splits.coq_stdlib_problems`, decided over the unfiltered library of the same prefixes,
  fraction and seed before the proof-length cut), so a held-out module is never seen in training, whatever
  cut another set makes.

A proof whose stepping fails midway (a tactic Coq rejects on its own, e.g. after a ``Proof with`` that the
corpus drops, a timeout, a crash) keeps the transitions before the failure and is counted as failed.

Run: ``python -m proofrl.data.tactics --out DIR [--limit N] [--workers 2]`` writes ``DIR/train.jsonl``,
``DIR/held-out.jsonl`` and ``DIR/summary.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ProofrlError
from ..problems import Problem, write_jsonl
from ..provers.backend import get_backend, goal_count, state_text


def proof_tactics(proof: str) -> list[str]:
    """The tactic sentences of a ``Proof. … Qed.`` text (``Proof``/``Qed``/``Defined`` left out)."""
    from ..provers.coq.sentences import split_sentences

    out = [s.text for s in split_sentences(proof)]
    if out and re.match(r"Proof\b", out[0]):
        out = out[1:]
    if out and re.fullmatch(r"(?:Qed|Defined)\s*\.", out[-1]):
        out = out[:-1]
    return out


@dataclass
class ProofSteps:
    """What stepping one human proof gave: its transitions, and why it stopped early (None: it stepped
    through and no goal is left)."""

    problem: Problem
    transitions: list[dict[str, Any]] = field(default_factory=list)
    failure: str | None = None
    """``statement: …``, ``step N: <kind>: …``, ``parse: …``, or ``goals left: …``"""
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        return self.failure is None


def step_proof(prover: Any, problem: Problem, *, split: str = "", timeout: float | None = None) -> ProofSteps:
    """Step ``problem.proof`` tactic by tactic on ``prover`` (loaded with ``problem.header``)."""
    t0 = time.monotonic()
    out = ProofSteps(problem)
    try:
        tactics = proof_tactics(problem.proof)
    except (ValueError, ProofrlError) as e:
        out.failure = f"parse: {e}"
        return out
    try:
        state = prover.start(problem.theorem, timeout=timeout)
    except ProofrlError as e:  # the statement does not elaborate, or the prover broke
        out.failure = f"statement: {type(e).__name__}: {str(e)[:300]}"
        out.seconds = time.monotonic() - t0
        return out
    before, lang = state_text(state), get_backend(problem.backend)
    for i, tac in enumerate(tactics):
        r = prover.step(state, tac, timeout=timeout)
        if not r.ok or r.state is None:
            out.failure = f"step {i}: {r.failure}"[:400]
            break
        after = state_text(r.state)
        out.transitions.append(
            {
                "theorem": problem.name,
                "header": problem.header,
                "module": problem.module,
                "statement": problem.formal_statement,
                "split": split,
                "step": i,
                "state_before": before,
                "tactic": tac,
                "state_after": after,
                "goals_before": goal_count(state),
                "goals_after": goal_count(r.state),
                "structural": lang.is_structural(tac),
            }
        )
        state, before = r.state, after
    else:
        if not state.solved:
            out.failure = f"goals left: {state_text(state)[:200]}"
    out.seconds = time.monotonic() - t0
    return out


def split_problems(
    problems: Sequence[Problem], *, held_out_fraction: float = 0.2, seed: int = 0
) -> list[tuple[Problem, str]]:
    """Each problem with its side, ``train`` or ``held-out``: :func:`~proofrl.data.splits.split_by_module`
    (the one split function; a stdlib problem keeps its module's side), returned in input order."""
    from .splits import _group, split_by_module

    _, held = split_by_module(problems, held_out_fraction=held_out_fraction, seed=seed)
    held_groups = {_group(p) for p in held}
    return [(p, "held-out" if _group(p) in held_groups else "train") for p in problems]


@dataclass
class ExtractionSummary:
    proofs: int = 0
    clean: int = 0
    failed: int = 0
    transitions: int = 0
    by_split: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    """failure kind (``statement``, ``step: error``, ``step: timeout``, ``goals left``, ...) → proofs"""
    seconds: float = 0.0
    prover_seconds: float = 0.0
    """summed over proofs: time spent starting and stepping (across workers)"""
    failed_examples: list[str] = field(default_factory=list)

    @property
    def transitions_per_s(self) -> float:
        return self.transitions / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["transitions_per_s"] = round(self.transitions_per_s, 2)
        d["clean_share"] = round(self.clean / self.proofs, 4) if self.proofs else 0.0
        return d


def _failure_kind(failure: str) -> str:
    if failure.startswith("step "):
        kind = failure.split(": ", 2)[1] if failure.count(": ") >= 1 else "?"
        return f"step: {kind}"
    return failure.split(":", 1)[0]


def extract_transitions(
    problems: Sequence[Problem],
    *,
    splits: Sequence[str] | None = None,
    workers: int = 2,
    timeout: float | None = 10.0,
    pool: Any = None,
    on_proof: Callable[[ProofSteps], None] | None = None,
) -> tuple[list[ProofSteps], ExtractionSummary]:
    """Step every problem's human proof, ``workers`` Coq processes at once (a :class:`ProverPool` of that
    size unless ``pool`` is given; jobs go to processes already holding their header). Results come back in
    input order; ``on_proof`` is called as each proof finishes (in completion order, from worker threads)."""
    from ..provers.factory import make_pool
    from ..provers.pool import PoolConfig

    splits = list(splits) if splits is not None else [p.split for p in problems]
    own = pool is None
    pool = pool or make_pool("coq", pool=PoolConfig(workers=workers))
    results: list[ProofSteps | None] = [None] * len(problems)
    t0 = time.monotonic()
    lock = threading.Lock()

    def one(i: int) -> None:
        p = problems[i]
        try:
            with pool.lease(p.header) as prover:
                res = step_proof(prover, p, split=splits[i], timeout=timeout)
        except ProofrlError as e:  # the header does not load, or a process would not start
            res = ProofSteps(p, failure=f"statement: {type(e).__name__}: {str(e)[:300]}")
        results[i] = res
        if on_proof is not None:
            with lock:
                on_proof(res)

    # by header, so each process loads few headers; input order inside a header
    order = sorted(range(len(problems)), key=lambda i: (problems[i].header, i))
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tactic-data") as ex:
            for f in [ex.submit(one, i) for i in order]:
                f.result()
    finally:
        if own:
            pool.close()
    done: list[ProofSteps] = results  # type: ignore[assignment]
    s = ExtractionSummary(seconds=time.monotonic() - t0)
    for r in done:
        s.proofs += 1
        s.transitions += len(r.transitions)
        s.prover_seconds += r.seconds
        for t in r.transitions:
            s.by_split[t["split"]] = s.by_split.get(t["split"], 0) + 1
        if r.clean:
            s.clean += 1
        else:
            s.failed += 1
            kind = _failure_kind(r.failure or "")
            s.failures[kind] = s.failures.get(kind, 0) + 1
            if len(s.failed_examples) < 20:
                s.failed_examples.append(f"{r.problem.key}: {r.failure}"[:300])
    s.prover_seconds = round(s.prover_seconds, 2)
    s.seconds = round(s.seconds, 2)
    return done, s


def stdlib_tactic_problems(
    *,
    prefixes: Sequence[str] | None = None,
    max_proof_chars: int | None = None,
    held_out_fraction: float = 0.2,
    seed: int = 0,
    limit: int | None = None,
) -> list[Problem]:
    """The Coq stdlib theorems with their human proofs, each with ``split`` set by its module's side (decided
    over the unfiltered library, before the proof-length cut and before ``limit`` takes the first N)."""
    from .coq_stdlib import CORE_PREFIXES
    from .splits import coq_stdlib_problems

    sided = coq_stdlib_problems(
        prefixes=prefixes or CORE_PREFIXES,
        max_proof_chars=max_proof_chars,
        held_out_fraction=held_out_fraction,
        seed=seed,
    )
    return sided if limit is None else sided[:limit]


def read_transitions(path: str | Path) -> list[dict[str, Any]]:
    """The records of a transitions JSONL file (ours or :func:`read_leandojo`'s, written out)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def build_tactic_data(
    out: str | Path,
    *,
    limit: int | None = None,
    workers: int = 2,
    prefixes: Sequence[str] | None = None,
    max_proof_chars: int | None = None,
    held_out_fraction: float = 0.2,
    seed: int = 0,
    timeout: float | None = 10.0,
    console: Any = None,
    progress: bool = True,
) -> ExtractionSummary:
    """Step the stdlib's human proofs and write ``out/train.jsonl``, ``out/held-out.jsonl`` and
    ``out/summary.json``, with a progress bar (proofs, transitions, failures) on ``console``."""
    from rich.console import Console

    from ..progress import progress_bar

    out = Path(out)
    console = console or Console(stderr=True)
    problems = stdlib_tactic_problems(
        prefixes=prefixes, max_proof_chars=max_proof_chars, held_out_fraction=held_out_fraction, seed=seed, limit=limit
    )
    counts: Counter[str] = Counter()
    with progress_bar(detail="{task.fields[info]}", remaining=True, console=console, disable=not progress) as bar:
        task = bar.add_task("stepping human proofs", total=len(problems), info="")

        def on_proof(r: ProofSteps) -> None:
            counts["transitions"] += len(r.transitions)
            counts["failed"] += not r.clean
            bar.update(task, advance=1, info=f"{counts['transitions']} transitions, {counts['failed']} failed")

        results, summary = extract_transitions(problems, workers=workers, timeout=timeout, on_proof=on_proof)
    for side in ("train", "held-out"):
        write_jsonl((t for r in results for t in r.transitions if t["split"] == side), out / f"{side}.jsonl")
    info = {
        **summary.to_json(),
        "workers": workers,
        "limit": limit,
        "max_proof_chars": max_proof_chars,
        "held_out_fraction": held_out_fraction,
        "seed": seed,
        "held_out_modules": sorted({p.module for p in problems if p.split == "held-out"}),
    }
    (out / "summary.json").write_text(json.dumps(info, indent=2))
    return summary


# -- LeanDojo Benchmark ------------------------------------------------------------------------------------


def _theorems(path: Path) -> Iterator[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:  # JSONL: one theorem per line
        for line in text.splitlines():
            if line.strip():
                yield json.loads(line)
        return
    if isinstance(data, dict):
        data = data.get("theorems", [data])
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of theorems")
    yield from data


def read_leandojo(path: str | Path, *, split: str = "") -> Iterator[dict[str, Any]]:
    """Transitions from a LeanDojo Benchmark file (``train.json``/``val.json``/``test.json``: a list of
    theorems with ``full_name``, ``file_path``, ``traced_tactics``; a JSONL variant is read too).

    Each traced tactic gives one record like ours: ``theorem`` = ``full_name``, ``module`` = ``file_path``,
    ``header`` = ``""`` (Lean headers come with the problem set), ``step`` its index, ``state_before`` /
    ``tactic`` / ``state_after`` as traced, goal counts from the state text
    (:func:`proofrl.provers.lean.backend.goal_count_text`), ``annotated_tactic`` the tactic with ``<a>…</a>`` premise
    marks, and ``premises`` the ``full_name`` of each annotated provenance. ``split`` is written into every record (e.g.
    ``train``)."""
    from ..provers.lean.backend import goal_count_text

    path, lean = Path(path), get_backend("lean")
    for th in _theorems(path):
        name = th.get("full_name") or th.get("name") or ""
        module = th.get("file_path", "")
        for i, t in enumerate(th.get("traced_tactics") or []):
            annotated = t.get("annotated_tactic") or [t.get("tactic", ""), []]
            text, provs = (
                (annotated[0], annotated[1])
                if isinstance(annotated, (list, tuple)) and len(annotated) == 2
                else (str(annotated), [])
            )
            before, after = t.get("state_before", ""), t.get("state_after", "")
            tactic = t.get("tactic", text)
            yield {
                "theorem": name,
                "header": "",
                "module": module,
                "statement": "",
                "split": split,
                "step": i,
                "state_before": before,
                "tactic": tactic,
                "state_after": after,
                "goals_before": goal_count_text(before),
                "goals_after": goal_count_text(after),
                "structural": lean.is_structural(tactic),
                "annotated_tactic": text,
                "premises": [p.get("full_name", "") for p in provs if isinstance(p, dict)],
            }


# -- CLI ---------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m proofrl.data.tactics", description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="directory for train.jsonl, held-out.jsonl, summary.json")
    ap.add_argument("--limit", type=int, default=None, help="step only the first N proofs (after the split)")
    ap.add_argument("--workers", type=int, default=2, help="Coq processes at once")
    ap.add_argument(
        "--prefix", action="append", default=None, help="module prefix (repeatable; default: the core stdlib)"
    )
    ap.add_argument("--max-proof-chars", type=int, default=None, help="only human proofs at most this long")
    ap.add_argument("--held-out-fraction", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per tactic")
    ap.add_argument(
        "--teach", type=Path, default=None, help="then teach the tiny tactic model on train.jsonl into this directory"
    )
    ap.add_argument("--epochs", type=int, default=8, help="epochs of --teach")
    args = ap.parse_args(argv)
    s = build_tactic_data(
        args.out,
        limit=args.limit,
        workers=args.workers,
        prefixes=args.prefix,
        max_proof_chars=args.max_proof_chars,
        held_out_fraction=args.held_out_fraction,
        seed=args.seed,
        timeout=args.timeout,
    )
    print(
        f"{s.proofs} proofs: {s.clean} clean, {s.failed} failed; {s.transitions} transitions "
        f"({s.by_split}) in {s.seconds:.1f} s = {s.transitions_per_s:.1f}/s → {args.out}"
    )
    if args.teach is not None:
        import json

        from ..policy.tactic import train_tiny_tactic_model

        train = [json.loads(line) for line in (args.out / "train.jsonl").read_text().splitlines() if line.strip()]
        train_tiny_tactic_model(train, args.teach, epochs=args.epochs, seed=args.seed)
        losses = json.loads((args.teach / "sft_losses.json").read_text())["losses"]
        print(
            f"tiny tactic model: {args.epochs} epochs on {len(train)} transitions, loss {losses[0]:.2f} → "
            f"{losses[-1]:.2f} "
            f"→ {args.teach} (proofrl search --policy hf:{args.teach})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
