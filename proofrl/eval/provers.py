"""Coq's automation, CoqHammer and proofrl's search side by side on one problem set, one wall budget per theorem.

``proofrl eval search PROBLEMS [--rows a,b,c,d] [--seconds S] [--policy hf:DIR]`` (:func:`cli_eval_search`) and
``benchmarks/provers.py`` run these rows, every theorem with the same wall-clock budget ``S`` in every row:

(a) one-shot automation: ``intros; T.`` for each tactic T of :data:`AUTOMATION` alone, and the best
    combination, ``intros; solve [timeout t T1 | timeout t T2 | ...]`` with the tactics in the order of how many
    theorems each proved alone in this run and the budget shared evenly (t = S / tactics);
(b) CoqHammer: ``intros; sauto.`` (its reconstruction tactics, no external prover) and ``intros; hammer.``
    (the ATPs it finds on ``PATH``, ``Set Hammer ATPLimit``; :func:`detect_atps`);
(c) proofrl search with a tactic model (by default the tiny one): best-first and MCTS, ``S`` each per theorem;
(d) (c) with the automation tactics of (a) and ``sauto`` proposed at every node before the model's own
    (:class:`WithAutomation`, as Lean Copilot adds aesop to the model's tactics);
(e) best-first search with the k-NN source over a proof memory of the standard library's human proofs
    (:mod:`proofrl.policy.memory`; the modules of the problems themselves left out), offline;
(f) the same memory online: each proof the run finds goes in at once;
(g) (f) with the automation of (a) proposed at every node;
(h) (g) with premise retrieval (:mod:`proofrl.policy.premises`) over the statements of the standard library's
    theorems (the problems' own modules left out).

``coq-stdlib-files:N`` runs the anchors' protocol instead, each file's lemmas in order with what precedes them
(:mod:`proofrl.eval.library`).

Every header gets :data:`AUTOMATION_HEADER` (and CoqHammer's modules for (b) and (d)) so the automation exists.
A theorem is proved only when a fresh ``coqc`` accepts the proof: for (a)/(b) the one-shot script *is* that
check, run under the budget; for (c)/(d) the search's final check. Per row: theorems proved, wall seconds per
theorem (the row's wall time / theorems, ``workers`` theorems at once) and CPU seconds per theorem (this process
and its Coq and ATP processes, read from ``/proc``: :class:`DescendantCPU`). Per theorem (``results.jsonl``):
proved, proof, wall seconds, the final check's verdict and CPU seconds, the row's CPU shared out by wall
seconds (theorems run at once and every prover process is forked by one thread, so a process cannot be
told to a theorem). For ``hammer`` proofs, the ATP that found the proof (CoqHammer prints ``CVC4 (nbayes-128)
succeeded``; a proof found by its reconstruction tactics before any ATP ran names none) and the tactic
CoqHammer says replaces ``hammer``.

Debian's CoqHammer calls CVC4 through ``htimeout``, which it installs outside ``PATH``
(:data:`HAMMER_LIBEXEC`): without it on ``PATH`` every CVC4 call fails and only E runs. Z3 is called as
``z3_tptp``, a program Debian's ``z3`` does not ship, so CoqHammer reports Z3 not found.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import re
import resource
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..policy.sources import AUTOMATION, AUTOMATION_HEADER, HAMMER_TACTICS_HEADER, MenuPolicy, MixedPolicy
from ..problems import Problem
from ..provers.coq.backend import CoqBackend
from .row_store import Row, RowStore, pace_words, run_key

HAMMER_LIBEXEC = "/usr/libexec/coq-hammer"
"""where Debian's CoqHammer keeps ``htimeout`` (through which it runs CVC4) and ``predict``"""
ATP_PROGRAMS = {"Vampire": "vampire", "Eprover": "eprover", "Z3": "z3_tptp", "CVC4": "cvc4"}
"""the program CoqHammer 1.3 runs for each ATP (it detects each by running it)"""
ROWS = ("a", "b", "c", "d")
"""the first comparison's rows: Coq's automation, CoqHammer, the tactic model's search with and without it"""
ALL_ROWS = (*ROWS, "e", "f", "g", "h", "i", "j", "k")
MEMORY_ROWS = ("e", "f", "g", "h", "i", "j", "k")
"""the rows whose policy is the proof memory, or reads it (k)"""
AUTOMATION_ROWS = ("g", "h", "i", "j")
"""the memory rows with the automation of (a) proposed at every node"""
PREMISE_ROWS = ("h", "i", "j")
"""the memory rows with premise retrieval"""
CONTEXT_ROWS = ("i", "k")
"""the memory rows with a tactic model reading the retrieved context: beside the other sources (i), alone (k)"""
PREMISE_MEMORY_ROWS = (*PREMISE_ROWS, "k")
"""the rows that keep the premises: proposed as tactics by (h)-(j), read in the model's prompt by (i) and (k)"""
HAMMER_ROWS = ("b", "j")
"""the rows that need CoqHammer"""
NODE_HAMMER_TACTICS = ("sauto", "qauto", "hauto")
"""CoqHammer's reconstruction tactics row (j) may propose at every node: ``sauto`` (the full search), ``qauto`` and
``hauto`` (its presets with less search: cheaper to fail, weaker)"""
MEMORY_LABELS = {
    "e": "k-NN, offline memory",
    "f": "k-NN, online memory",
    "g": "k-NN online + automation",
    "h": "k-NN online + automation + premises",
    "i": "(h) + tactic model reading the retrieved context",
    "j": "(h) + CoqHammer's sauto at every node",
    "k": "tactic model alone reading the retrieved context of the online memory and premises",
}


def memory_label(kind: str, s: Any) -> str:
    """The row's name in reports, ``(j) …`` naming the CoqHammer tactic it proposes (``s.node_hammer``) and the cap
    on each call (``s.node_hammer_seconds``), where one is set, and the engine where it is not best-first."""
    label = MEMORY_LABELS[kind]
    if kind == "j":
        label = label.replace("sauto", s.node_hammer)
        if s.node_hammer_seconds is not None:
            label += f", at most {s.node_hammer_seconds:g} s a call"
    if s.memory_engine != "best-first":
        label += f", by {ENGINE_LABEL[s.memory_engine]}"
    return f"({kind}) {label}"


ENGINES = {"best-first": "reprover", "mcts": "reap"}
"""search engine -> the recipe whose defaults it runs with"""
ENGINE_LABEL = {"best-first": "best-first", "mcts": "MCTS"}
SMOKE_TACTICS = ("lia", "lra", "intuition")
_ATP_LINE = re.compile(r"^(\w+) \(([^)]*)\) succeeded", re.MULTILINE)
_REPLACE = re.compile(r"Replace the hammer tactic with:\s*(.+?)(?:\n\S|\Z)", re.DOTALL)


def smoke_problems() -> list[Problem]:
    """Two miniF2F-style statements of the kinds the benchmark has (nat, R), for smoke runs and tests."""
    return [
        Problem("smoke_nat", "Theorem smoke_nat : forall n : nat, n + 0 = n.", split="test"),
        Problem(
            "smoke_r",
            "Theorem smoke_r : forall x : R, x + 1 > x.",
            "Require Import Reals.\nOpen Scope R_scope.\n",
            split="test",
        ),
    ]


def hammer_header(atp_seconds: int) -> str:
    return f"From Hammer Require Import Hammer.\nSet Hammer ATPLimit {atp_seconds}.\n"


def hammer_installed() -> bool:
    from ..data.corpus import user_contrib

    return (user_contrib() / "Hammer").is_dir()


@contextlib.contextmanager
def hammer_path() -> Iterator[None]:
    """:data:`HAMMER_LIBEXEC` on ``PATH`` while the block runs (prover processes copy this process's
    environment), so CoqHammer's CVC4 calls find ``htimeout``."""
    old = os.environ.get("PATH", "")
    if os.path.isdir(HAMMER_LIBEXEC) and HAMMER_LIBEXEC not in old.split(os.pathsep):
        os.environ["PATH"] = old + os.pathsep + HAMMER_LIBEXEC
    try:
        yield
    finally:
        os.environ["PATH"] = old


def detect_atps() -> dict[str, bool]:
    """Which ATPs CoqHammer finds: each of :data:`ATP_PROGRAMS` on ``PATH`` (inside :func:`hammer_path`)."""
    with hammer_path():
        found = {atp: shutil.which(prog) is not None for atp, prog in ATP_PROGRAMS.items()}
    return found


def hammer_says(printed: str) -> tuple[str, str]:
    """``(ATP, replacement)`` from what ``hammer`` printed: the ATP (and strategy) that succeeded, ``""`` when
    its reconstruction tactics proved the goal before any ATP ran, and the tactic it says replaces it."""
    atp = _ATP_LINE.search(printed)
    rep = _REPLACE.search(printed)
    return (f"{atp.group(1)} ({atp.group(2)})" if atp else "", " ".join(rep.group(1).split()) if rep else "")


class WithAutomation(MixedPolicy):
    """A tactic policy whose proposals at every state are the automation tactics (first, log-probability 0:
    the engine tries them before the model's) and then the model's own (the policy floor's
    :class:`~proofrl.policy.sources.MixedPolicy` of a menu and the model)."""

    def __init__(self, policy: Any, tactics: tuple[str, ...]):
        super().__init__([MenuPolicy(tactics, source="automation"), policy])
        self.policy, self.tactics = policy, tactics
        self.name = f"{getattr(policy, 'name', 'policy')}+automation"


class DescendantCPU:
    """CPU seconds of this process plus those of its descendants (coqc, coqidetop, the ATPs), read from
    ``/proc`` every ``interval`` seconds while a row runs: the sandbox's extra process level keeps the Coq
    processes out of ``RUSAGE_CHILDREN``. A process's last ``interval`` before it exits is missed, so the
    figure is a lower bound."""

    def __init__(self, interval: float = 0.1):
        self.interval, self._stop = interval, threading.Event()
        self.seen: dict[int, float] = {}
        self.seconds = 0.0
        self._tick = os.sysconf("SC_CLK_TCK")

    def _walk(self, pid: int) -> None:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            self.seen[pid] = max(self.seen.get(pid, 0.0), (int(fields[11]) + int(fields[12])) / self._tick)
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    for child in f.read().split():
                        self._walk(int(child))
        except (OSError, ValueError, IndexError):
            pass  # it exited meanwhile

    def _loop(self) -> None:
        me = os.getpid()
        while not self._stop.wait(self.interval):
            for task in os.listdir(f"/proc/{me}/task"):
                try:
                    with open(f"/proc/{me}/task/{task}/children") as f:
                        for child in f.read().split():
                            self._walk(int(child))
                except OSError:
                    pass

    def __enter__(self) -> DescendantCPU:
        own = resource.getrusage(resource.RUSAGE_SELF)
        self._own0 = own.ru_utime + own.ru_stime
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        own = resource.getrusage(resource.RUSAGE_SELF)
        self.seconds = own.ru_utime + own.ru_stime - self._own0 + sum(self.seen.values())


def with_header(problem: Problem, extra: str) -> Problem:
    return replace(problem, header=problem.header.rstrip("\n") + "\n" + extra)


# -- the problems ----------------------------------------------------------------------------------------------
def select_problems(
    spec: str, *, split: str | None = None, limit: int | None = None, seed: int = 0
) -> tuple[list[Problem], str]:
    """``(problems, label)`` of a problem set as ``proofrl search`` names it (``coq-stdlib:held-out``,
    ``coq-lib:mathcomp:test``, a JSONL path), or ``PATH:SPLIT`` for one split of a JSONL file. Statements
    marked as not compiling with this Coq (miniF2F-rocq's ``compiles_with_coq_8_16: false``) are left out;
    ``limit`` keeps that many drawn with ``seed`` (sorted by name). Raises :class:`ConfigError` naming the fix."""
    from ..data.splits import problem_set
    from ..preflight import require_backend

    path, sep, side = spec.rpartition(":")
    if sep and not spec.startswith(("coq-lib:", "coq-stdlib")) and Path(path).is_file():
        spec, split = path, side  # FILE.jsonl:test
    if spec.startswith("coq-stdlib"):
        require_backend("coq")  # the problems are read where coqc says the standard library is
    try:
        problems = problem_set(spec, split=split)
    except (ValueError, FileNotFoundError) as e:
        why = " ".join(str(e).split())
        if not spec.startswith(("coq-lib:", "coq-stdlib")):  # those errors name their own fix
            why += "; give a JSONL file (FILE or FILE:SPLIT), coq-stdlib:held-out or coq-lib:NAME:test"
        raise ConfigError(why) from None
    ok = [p for p in problems if p.extra.get("compiles_with_coq_8_16", True) is not False]
    if limit is not None:
        if limit < 1:
            raise ConfigError(f"--limit must be at least 1, got {limit}")
        ok = sorted(random.Random(seed).sample(ok, min(limit, len(ok))), key=lambda p: p.key)
    if not ok:
        raise ConfigError(f"no problems in {spec}" + (f" with split {split!r}" if split else ""))
    if any(p.backend != CoqBackend.name for p in ok):  # the rows are Coq's own automation
        raise ConfigError(f"{spec}: these rows are Coq's automation and CoqHammer; the problems must be Coq's")
    label = spec + (f" ({split})" if split else "")
    return ok, label


# -- the rows --------------------------------------------------------------------------------------------------
@dataclass
class RowsConfig:
    """One run's rows and budgets. ``seconds``: wall-clock budget per theorem in every row; ``tactics``: the
    automation of (a) (and of (d)); ``engines``: of ``best-first``, ``mcts`` for (c)/(d); ``width``: tactics
    the model proposes per node; ``atp_seconds``: ``Set Hammer ATPLimit``; ``node_hammer``: the CoqHammer
    tactic of :data:`NODE_HAMMER_TACTICS` row (j) proposes at every node, each call capped at
    ``node_hammer_seconds`` (1 s, chosen on the stdlib's training-side files against no cap; None: the search's
    step limit, ``tactic_timeout``); ``memory_engine``: what searches with the memory's sources, rows (e)-(j):
    ``best-first`` or ``mcts`` at the same wall budget; ``policy``: ``hf:DIR`` for (c)/(d); ``context_model``: the
    folder of row (i)'s tactic model, taught with retrieved context; ``seed``: what that model samples under."""

    rows: tuple[str, ...] = ROWS
    seconds: float = 10.0
    workers: int = 2
    tactics: tuple[str, ...] = AUTOMATION
    engines: tuple[str, ...] = ("best-first", "mcts")
    width: int = 4
    atp_seconds: int = 5
    node_hammer: str = "sauto"
    node_hammer_seconds: float | None = 1.0
    memory_engine: str = "best-first"
    policy: str = ""
    context_model: str = ""
    seed: int = 0

    @property
    def tactic_timeout(self) -> float:
        return min(5.0, self.seconds)


def parse_list(text: str, valid: Sequence[str], what: str) -> tuple[str, ...]:
    """Comma-separated names, each one of ``valid`` (:class:`ConfigError` naming the valid ones)."""
    names = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    bad = [x for x in names if x not in valid]
    if bad or not names:
        raise ConfigError(f"unknown {what} {', '.join(bad) or repr(text)}; valid: {', '.join(valid)}")
    return names


def check_settings(s: RowsConfig) -> None:
    """Bad settings as one :class:`ConfigError` each, naming the fix, before anything runs."""
    if not s.seconds > 0 or not math.isfinite(s.seconds):
        raise ConfigError(f"--seconds must be a positive number, got {s.seconds}")
    if s.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {s.workers}")
    if s.memory_engine not in ENGINES:
        raise ConfigError(f"--memory-engine {s.memory_engine!r}: choose among {', '.join(ENGINES)}")
    if s.node_hammer not in NODE_HAMMER_TACTICS:
        raise ConfigError(f"--node-hammer {s.node_hammer!r}: choose among {', '.join(NODE_HAMMER_TACTICS)}")
    if s.node_hammer_seconds is not None and not (0 < s.node_hammer_seconds < math.inf):
        raise ConfigError(f"--node-hammer-seconds must be a positive number, got {s.node_hammer_seconds}")
    if hammered := [r for r in HAMMER_ROWS if r in s.rows and not hammer_installed()]:
        raise ConfigError(
            f"row {','.join(hammered)} needs CoqHammer: PROOFRL_COQ_LIBS=1 bash scripts/setup.sh "
            "(apt-get install libcoq-hammer eprover z3 cvc4), or leave it out of --rows"
        )
    if set(s.rows) & {"c", "d"} and s.policy:
        kind, _, where = s.policy.partition(":")
        if kind != "hf" or not Path(where).is_dir():
            raise ConfigError(f"--policy {s.policy!r}: give hf:DIR, a local tactic model directory")
    if set(CONTEXT_ROWS) & set(s.rows) and s.context_model and not (Path(s.context_model) / "config.json").is_file():
        raise ConfigError(
            f"--context-model {s.context_model!r}: give the folder of a tactic model (leave the option out to build "
            "the default one, taught with retrieved context)"
        )


def _share_cpu(results: list[dict[str, Any]], cpu: float) -> None:
    total = sum(r["wall_s"] for r in results) or 1.0
    for r in results:
        r["cpu_s"] = round(cpu * r["wall_s"] / total, 3)


def one_shot(
    problems: Sequence[Problem],
    script: str,
    header: str,
    seconds: float,
    workers: int,
    on_done: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """``script`` as each theorem's whole proof through a fresh ``coqc`` under ``seconds``."""
    from ..provers.coq.prover import CoqConfig, coqc_check

    config = CoqConfig(timeout=seconds)

    def run(p: Problem) -> dict[str, Any]:
        t0 = time.monotonic()
        v = coqc_check(with_header(p, header).theorem, script, config, timeout=seconds)
        if on_done:
            on_done()
        return {
            "name": p.key,
            "proved": v.valid,
            "proof": script if v.valid else "",
            "wall_s": round(time.monotonic() - t0, 3),
            "final_check": v.status.value,
            "reason": "; ".join(v.reasons)[:200],
            "printed": "\n".join(m.text for m in v.messages if m.severity == "info"),
        }

    with ThreadPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(run, problems))


def searched(
    problems: Sequence[Problem],
    policy: Any,
    recipe: str,
    header: str,
    settings: RowsConfig,
    out: Path,
    progress: bool,
) -> list[dict[str, Any]]:
    """proofrl's search (``recipe``'s engine) under ``settings.seconds`` per theorem; ``out`` gets the search's
    own ``results.jsonl``, trees and trace."""
    from ..search.run import search_many

    probs = [with_header(p, header) for p in problems]
    cfg = row_search_config(recipe, settings)
    results = search_many(probs, policy, out_dir=out, workers=settings.workers, config=cfg, progress=progress)
    return [search_record(p, r) for p, r in zip(problems, results, strict=True)]


def row_search_config(recipe: str, s: RowsConfig) -> Any:
    """``recipe``'s search settings with a row's budget: ``s.seconds`` of wall time per theorem (no expansion,
    step or node cap), ``s.width`` tactics per node, ``s.tactic_timeout`` per tactic."""
    from ..search.config import load_search_config

    return load_search_config(
        recipe,
        **{
            "max_steps": None,
            "max_nodes": 10**6,
            "seconds": s.seconds,
            "width": s.width,
            "tactic_timeout": s.tactic_timeout,
        },
    )


def search_record(p: Problem, r: Any) -> dict[str, Any]:
    """A search row's ``results.jsonl`` record of ``p`` from its :class:`~proofrl.search.engine.SearchResult`."""
    proved = r.status == "proved"
    return {
        "name": p.key,
        "proved": proved,
        "proof": r.proof if proved else "",
        "wall_s": round(r.seconds, 3),
        "final_check": r.verdict.status.value if r.verdict else str(r.status),
        "reason": r.reason[:200],
        "proof_sources": r.line()["proof_sources"],
    }


def record_row(row: Row, rows: list[Row], results_path: Path, say: Callable[[str], None], unit: str) -> Row:
    """A finished row: its CPU shared out over its theorems, hammer's printing kept only in its own row, its
    records appended to ``results_path``, a line said (per ``unit``), and ``row`` appended to ``rows``."""
    _share_cpu(row.results, row.cpu)
    for r in row.results:
        if row.name != "(b) hammer":
            r.pop("printed", None)  # only hammer's printing says something (its ATP)
    rows.append(row)
    with open(results_path, "a", encoding="utf-8") as f:
        for r in row.results:
            f.write(json.dumps({"row": row.name, **r}) + "\n")
    summary = row.summary()
    say(
        f"{row.name}: {row.proved}/{len(row.results)} proved, {summary['wall_s_per_theorem']} s wall, "
        f"{summary['cpu_s_per_theorem']} s CPU per {unit}"
    )
    return row


def proofs_by_source(results: Sequence[dict[str, Any]]) -> dict[str, int]:
    """How many proved records' steps came from each combination of policy sources (``knn``, ``auto+knn``)."""

    def sources(r: dict[str, Any]) -> str:  # a step two sources proposed is ``knn+auto``: count each source once
        return "+".join(sorted({s for step in r["proof_sources"] for s in step.split("+")})) or "none"

    return dict(Counter(sources(r) for r in results if r["proved"]))


def proof_kind(proof: str, automation: Sequence[str]) -> str:
    """What a (d) proof is made of: ``automation`` (only automation tactics, e.g. one at the root), ``model``
    (only the model's) or ``model + automation``."""
    steps = [s.strip() for s in proof.splitlines()]
    steps = [s for s in steps if s and s not in ("{", "}", "Proof.", "Qed.") and not re.fullmatch(r"[-+*]+", s)]
    auto = [s in automation for s in steps]
    if all(auto):
        return "one automation tactic at the root" if len(steps) == 1 else f"{len(steps)} automation tactics"
    return "model + automation" if any(auto) else "model"


def run_rows(
    problems: Sequence[Problem],
    settings: RowsConfig,
    out: Path,
    *,
    progress: bool = True,
    say: Callable[[str], None] = print,
    transitions: Sequence[dict[str, Any]] = (),
    lemmas: Mapping[str, Sequence[tuple[str, str]]] | None = None,
    split_by_module: bool = True,
) -> list[Row]:
    """Run the rows of ``settings`` on ``problems``; ``out`` gets ``results.jsonl`` (one record per theorem per
    row, written as each row ends) and the searches' own folders. Returns the rows in run order. Rows e-i take
    their memory from ``transitions`` (:func:`proofrl.eval.library.library_transitions`, or a corpus's training
    side) and h-i their premises from ``lemmas`` (module -> ``(name, statement)``; None: the standard library's);
    ``split_by_module``: leave the problems' own modules out of both (the stdlib's memory holds every module),
    else only the problems themselves (a corpus's split already keeps its test side out)."""
    import torch

    s = settings
    check_settings(s)
    torch.set_num_threads(1)  # the prover processes run beside the policy on the same cores
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.jsonl"
    results_path.write_text("")
    rows: list[Row] = []
    has_hammer = hammer_installed()
    store = RowStore(out, run_key(problems, s, memory=transitions, premises=lemmas), say)

    def record(row: Row) -> Row:
        return record_row(row, rows, results_path, say, "theorem")

    def shot(name: str, script: str, header: str) -> Row:
        bar = _bar(progress)
        w0 = time.monotonic()
        with bar as b, DescendantCPU() as cpu:
            task = b.add_task(name, total=len(problems)) if b else None
            res = one_shot(problems, script, header, s.seconds, s.workers, (lambda: b.advance(task)) if b else None)
        return Row(name, res, time.monotonic() - w0, cpu.seconds, script)

    singles: dict[str, int] = {}
    if "a" in s.rows:
        for tac in s.tactics:
            name = f"(a) {tac}"
            row = record(store.row(name, shot, name, f"intros; {tac}.", AUTOMATION_HEADER))
            singles[tac] = row.proved
        union = {r["name"] for row in rows for r in row.results if r["proved"]}
        say(f"(a) any one tactic (union of {len(s.tactics)} runs): {len(union)}")
        order = sorted(s.tactics, key=lambda t: (-singles[t], s.tactics.index(t)))
        share = max(1, math.floor(s.seconds / len(order)))
        combo = "intros; solve [ " + " | ".join(f"timeout {share} {t}" for t in order) + " ]."
        record(store.row("(a) best combination", shot, "(a) best combination", combo, AUTOMATION_HEADER))
    if "b" in s.rows:
        sauto = AUTOMATION_HEADER + HAMMER_TACTICS_HEADER
        record(store.row("(b) sauto", shot, "(b) sauto", "intros; sauto.", sauto))
        record(store.row("(b) hammer", hammer_row, shot, AUTOMATION_HEADER, s.atp_seconds))
    if set(s.rows) & {"c", "d"}:
        from ..policy.tactic import make_tactic_policy

        policy = make_tactic_policy(s.policy)
        auto = tuple(f"intros; {t}." for t in s.tactics) + (("intros; sauto.",) if has_hammer else ())
        header_d = AUTOMATION_HEADER + (HAMMER_TACTICS_HEADER if has_hammer else "")
        for engine in s.engines:
            recipe, label = ENGINES[engine], ENGINE_LABEL[engine]
            for kind, pol, header in (("c", policy, AUTOMATION_HEADER), ("d", WithAutomation(policy, auto), header_d)):
                if kind not in s.rows:
                    continue
                name = f"({kind}) {label}" + (" + automation" if kind == "d" else "")
                folder = out / f"{kind}-{engine}"
                record(store.row(name, search_row, name, problems, pol, recipe, header, s, folder, progress, auto))
    for kind in MEMORY_ROWS:
        if kind in s.rows:
            name = memory_label(kind, s)
            args = (problems, kind, s, out, transitions, progress, lemmas, split_by_module)
            record(store.row(name, _memory_row, *args))
    return rows


def search_row(
    name: str,
    problems: Sequence[Problem],
    policy: Any,
    recipe: str,
    header: str,
    s: RowsConfig,
    folder: Path,
    progress: bool,
    auto: Sequence[str],
) -> Row:
    """Row (c) or (d) for one engine; (d)'s proofs sorted by what they are made of (:func:`proof_kind`)."""
    w0 = time.monotonic()
    with DescendantCPU() as cpu:
        res = searched(problems, policy, recipe, header, s, folder, progress)
    row = Row(name, res, time.monotonic() - w0, cpu.seconds)
    if name.startswith("(d)"):
        for r in res:
            r["proof_kind"] = proof_kind(r["proof"], auto) if r["proved"] else ""
        row.notes = {"proof_kinds": dict(Counter(r["proof_kind"] for r in res if r["proved"]))}
    return row


def hammer_row(shot: Callable[[str, str, str], Row], header: str, atp_seconds: int) -> Row:
    """Row (b)'s ``hammer``, ``header`` before its own, with the ATP each proof came from."""
    with hammer_path():
        row = shot("(b) hammer", "intros; hammer.", header + hammer_header(atp_seconds))
    for r in row.results:
        r["atp"], r["hammer_says"] = hammer_says(r["printed"]) if r["proved"] else ("", "")
    atps = Counter(r["atp"].split(" ")[0] or "none (reconstruction tactics)" for r in row.results if r["proved"])
    row.notes = {"atp_seconds": atp_seconds, "proofs_by_atp": dict(atps)}
    return row


def _memory_row(
    problems: Sequence[Problem],
    kind: str,
    s: RowsConfig,
    out: Path,
    transitions: Sequence[dict[str, Any]],
    progress: bool,
    lemmas: Mapping[str, Sequence[tuple[str, str]]] | None = None,
    split_by_module: bool = True,
) -> Row:
    """Row e, f, g, h, i, j or k: best-first search with the k-NN source over the human proofs of ``transitions``
    (:func:`run_rows`: with ``split_by_module``, of every module that holds none of ``problems``; else all but the
    problems' own: a theorem's own proof is never in its memory); h's and i's premises are the statements of
    ``lemmas`` left out alike; i adds the tactic model that reads the memory's and the premises' retrieval
    (:func:`context_source`), j CoqHammer's ``sauto`` (:func:`sauto_source`); k searches with that model alone,
    the memory (learning online) and the premises only in its prompt."""
    from ..data.splits import stdlib_lemmas
    from ..policy.memory import KNNPolicy, ProofMemory
    from ..policy.premises import PremisePolicy
    from ..policy.sources import automation_menu

    own = {p.module for p in problems if p.module} if split_by_module else set()
    mine = {p.key for p in problems} | {p.name for p in problems}
    kept = [t for t in transitions if t.get("module") not in own and t.get("theorem") not in mine]
    mem = ProofMemory.from_transitions(kept, cap=None)
    knn = KNNPolicy(mem, online=kind != "e")
    premises = PremisePolicy()
    if kind in PREMISE_MEMORY_ROWS:
        known = stdlib_lemmas() if lemmas is None else lemmas
        premises.add_many(
            pair for module, pairs in known.items() if module not in own for pair in pairs if pair[0] not in mine
        )
    policy = memory_policy(kind, s, knn, premises, automation_menu(s.tactics))
    w0, start = time.monotonic(), len(mem)
    with DescendantCPU() as cpu:
        engine = s.memory_engine
        res = searched(problems, policy, ENGINES[engine], "", s, out / f"{kind}-{engine}", progress)
    row = Row(memory_label(kind, s), res, time.monotonic() - w0, cpu.seconds)
    row.notes = {
        "memory": {"start": start, "end": len(mem), "learned": mem.online_count},
        "proofs_by_source": proofs_by_source(res),
    }
    return row


def memory_policy(kind: str, s: RowsConfig, knn: Any, premises: Any, automation: Any) -> Any:
    """Memory row ``kind``'s policy: the k-NN source ``knn`` (all but k), the ``automation`` menu (g-j; None where
    none is available), ``premises`` as tactics (h-j), the tactic model reading ``knn``'s memory and ``premises``
    (i, and alone in k), CoqHammer's ``sauto`` (j); several sources pooled by a :class:`MixedPolicy`."""
    sources: list[Any] = [] if kind == "k" else [knn]  # k: the model alone, the memory only in its prompt
    if kind in AUTOMATION_ROWS and automation is not None:
        sources.append(automation)
    if kind in PREMISE_ROWS:
        sources.append(premises)
    if kind in CONTEXT_ROWS:
        sources.append(context_source(s, knn.memory, premises.memory))
    if kind == "j":
        sources.append(sauto_source(s.node_hammer, s.node_hammer_seconds))
    return MixedPolicy(sources) if len(sources) > 1 else sources[0]


_LOADED_MODELS: dict[str, tuple[Any, Any]] = {}
_MODELS_LOCK = threading.Lock()


def sauto_source(tactic: str = "sauto", seconds: float | None = None) -> Any:
    """Row (j)'s extra source: a CoqHammer reconstruction tactic (``sauto``, or a cheaper preset of
    :data:`NODE_HAMMER_TACTICS`) after ``intros`` at every node, its plugin in the header (no ATP is called);
    ``seconds`` caps each call (a search's step limit otherwise). A failing ``sauto`` runs to its limit, while
    one that works mostly answers in well under a second."""
    from ..policy.sources import HAMMER_TACTICS_HEADER, MenuPolicy

    return MenuPolicy([f"intros; {tactic}."], header=HAMMER_TACTICS_HEADER, source=tactic, seconds=seconds)


def context_source(s: RowsConfig, memory: Any, premises: Any) -> Any:
    """Rows (i) and (k)'s tactic model (``s.context_model``, loaded once and shared) reading the retrieved context of
    ``memory`` and ``premises`` (:mod:`proofrl.policy.retrieval`), sampling the tactics the search asks for. A
    model taught on states alone gets none (the comparison that says what the context is worth)."""
    from ..policy.model import load_policy
    from ..policy.retrieval import Retriever, taught_shape
    from ..policy.tactic import HFTacticPolicy

    with _MODELS_LOCK:
        if s.context_model not in _LOADED_MODELS:
            _LOADED_MODELS[s.context_model] = load_policy(s.context_model, device="cpu")
        model, tok = _LOADED_MODELS[s.context_model]
    shape = taught_shape(s.context_model)
    return HFTacticPolicy(model, tok, seed=s.seed, retriever=Retriever(memory, premises, shape) if shape else None)


def _bar(progress: bool) -> Any:
    """A rich progress bar (one task per one-shot row), or nothing."""
    if not progress:
        return contextlib.nullcontext(None)
    from ..progress import progress_bar

    return progress_bar()


# -- the report ------------------------------------------------------------------------------------------------
def headline(rows: Sequence[Row]) -> dict[str, Any]:
    """(d)'s best against the best of (a) and (b), theorems proved (``nan`` where a side did not run)."""
    base = max((r.proved for r in rows if r.name.startswith(("(a)", "(b)"))), default=math.nan)
    best_d = max((r.proved for r in rows if r.name.startswith("(d)")), default=math.nan)
    ratio = best_d / base if base and not math.isnan(base) and not math.isnan(best_d) else math.nan
    automation = {r["name"] for row in rows if row.name.startswith(("(a)", "(b)")) for r in row.results if r["proved"]}
    beyond = {
        row.name: sorted(r["name"] for r in row.results if r["proved"] and r["name"] not in automation)
        for row in rows
        if not row.name.startswith(("(a)", "(b)"))
    }
    return {
        "best_of_a_b": base,
        "best_of_d": best_d,
        "ratio_d_over_a_b": ratio,
        "proved_by_a_or_b": len(automation),
        "beyond_a_and_b": beyond,
    }


def markdown(rows: Sequence[Row]) -> str:
    lines = ["| row | proved | wall s / theorem | CPU s / theorem |", "|---|---|---|---|"]
    for row in rows:
        t = row.summary()
        lines.append(
            f"| {row.name} | {t['proved']}/{t['theorems']} | {t['wall_s_per_theorem']} | {t['cpu_s_per_theorem']} |"
        )
    return "\n".join(lines)


def write_report(
    out: Path, rows: Sequence[Row], *, label: str, settings: RowsConfig, command: str, load: dict[str, Any]
) -> dict[str, Any]:
    """``summary.json`` and ``report.md`` (the table, the command, the load, the ATPs and (d)'s proofs)."""
    n = len(rows[0].results) if rows else 0
    atps = detect_atps() if "b" in settings.rows else {}
    head = headline(rows)
    summary = {
        "problems": label,
        "theorems": n,
        "command": command,
        "settings": asdict(settings),
        "load_average": load,
        "atps_found": atps,
        "rows": {row.name: row.summary() for row in rows},
        **head,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    text = [
        "# proofrl eval search",
        "",
        f"{n} theorems of `{label}`, {settings.seconds:g} s wall per theorem in every row, {settings.workers} "
        f"theorems at once; load average {load['before']} before, {load['after']} after (1, 5, 15 min).",
        "",
        "```",
        command,
        "```",
        "",
        markdown(rows),
        "",
        "Wall s / theorem: the row's wall time / theorems. CPU s / theorem: this process and its Coq and ATP "
        "processes. Every proof is accepted by a fresh `coqc`.",
        "",
    ]
    kept = [(row.name, row.notes["kept_from"]) for row in rows if "kept_from" in row.notes]
    if kept:
        text += [
            "Kept from an earlier run into this folder with the same problems and settings (`rows/`), not run "
            "again: " + "; ".join(f"{name}, finished {k['finished']} at load {k['load_average']}" for name, k in kept),
            "",
        ]
    for row in rows:  # a wall-second budget is as large as the machine is fast: each sitting's pace
        if len(row.notes.get("sittings", ())) > 1:
            text += [
                f"{row.name} was searched in {len(row.notes['sittings'])} sittings: "
                + "; ".join(
                    f"{s['modules']} modules ({s['lemmas']} lemmas) begun {s['started'] or 'at a time not recorded'}, "
                    f"{s['wall_s']:,.0f} s of wall{' (its modules added up)' if 'wall_from' in s else ''}, "
                    f"pace {pace_words(s)}"
                    for s in row.notes["sittings"]
                )
                + ".",
                "",
            ]
    if not math.isnan(head["ratio_d_over_a_b"]):
        text += [
            f"(d)'s best / the best of (a) and (b): {head['best_of_d']} / {head['best_of_a_b']} = "
            f"{head['ratio_d_over_a_b']:.3f}.",
            "",
        ]
    if head["beyond_a_and_b"]:
        text += [
            f"Proved by no row of (a) and (b) (those prove {head['proved_by_a_or_b']} between them): "
            + ", ".join(f"{name} {len(names)}" for name, names in head["beyond_a_and_b"].items())
            + ".",
            "",
        ]
    for row in rows:
        if row.name == "(b) hammer":
            found = ", ".join(a for a, ok in atps.items() if ok) or "none"
            missing = ", ".join(a for a, ok in atps.items() if not ok) or "none"
            text += [
                f"`hammer` (ATPLimit {settings.atp_seconds}): ATPs CoqHammer finds: {found}; not found: {missing} "
                f"(Z3 is run as `z3_tptp`; CVC4 through `htimeout`, put on `PATH` from {HAMMER_LIBEXEC}). "
                f"Proofs by ATP: {row.notes.get('proofs_by_atp', {})}.",
                "",
                "| theorem | ATP (strategy) | CoqHammer's replacement |",
                "|---|---|---|",
            ]
            text += [
                f"| {r['name']} | {r['atp'] or 'none: its reconstruction tactics'} | `{r['hammer_says']}` |"
                for r in row.results
                if r["proved"]
            ] or ["| (none proved) | | |"]
            text.append("")
        if "proofs_by_source" in row.notes:
            text += [f"{row.name}: proofs by the sources of their steps {row.notes['proofs_by_source']}.", ""]
        if "premise_steps_unresolved" in row.notes:
            text += [
                f"{row.name}: {row.notes['premise_steps_unresolved']} steps cited a retrieved premise whose name Coq "
                "did not know (a lemma of a module nested in its file).",
                "",
            ]
        if row.name.startswith("(d)"):
            text += [f"{row.name} proofs:", ""]
            text += [
                f"- {r['name']} ({r['proof_kind']}): `{' '.join(r['proof'].split())}`"
                for r in row.results
                if r["proved"]
            ] or ["- none"]
            text.append("")
    (out / "report.md").write_text("\n".join(text))
    return summary


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def console_table(rows: Sequence[Row]) -> Any:
    from rich.table import Table

    table = Table("row", "proved", "wall s / theorem", "CPU s / theorem")
    for row in rows:
        t = row.summary()
        table.add_row(
            row.name, f"{t['proved']}/{t['theorems']}", str(t["wall_s_per_theorem"]), str(t["cpu_s_per_theorem"])
        )
    return table
