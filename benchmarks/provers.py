"""miniF2F-rocq: Coq's own automation, CoqHammer and proofrl's search, side by side in one run.

    PROOFRL_COQ_LIBS=1 bash scripts/setup.sh         # CoqHammer, eprover, z3, cvc4 (and MathComp, std++)
    python benchmarks/provers.py --data minif2f.jsonl --split test --theorems 20 --seconds 20 --workers 2
    python benchmarks/provers.py --data coq-lib:mathcomp:test --theorems 10 --policy hf:MODEL
    python benchmarks/provers.py --smoke             # 2 theorems, 3 s each, 3 tactics, the tiny smoke model

Rows, every theorem with the same wall-clock budget (``--seconds``) in every row:

(a) one-shot automation: ``intros; T.`` for each tactic T of :data:`AUTOMATION` alone, and the best
    combination, ``intros; solve [timeout t T1 | timeout t T2 | ...]`` with the tactics in the order of how many
    theorems each proved alone in this run and the budget shared evenly (t = seconds / tactics);
(b) CoqHammer: ``intros; sauto.`` (its reconstruction tactics, no external prover) and ``intros; hammer.``
    (the ATPs Debian ships: eprover, z3, cvc4; ``Set Hammer ATPLimit``);
(c) proofrl search with the tiny tactic model: best-first and MCTS, ``--seconds`` each per theorem;
(d) (c) with the automation tactics of (a) and ``sauto`` proposed at every node beside the model's
    (:class:`WithAutomation`, as Lean Copilot adds aesop to the model's tactics).

Every header gets ``From Coq Require Import Lia Lra Psatz Ring Field ArithRing.`` (and CoqHammer's modules for (b) and
(d)) so the automation exists; a theorem is proved only when a fresh ``coqc`` accepts the proof (for (a)/(b) the
one-shot script *is* that check, run under the budget; for (c)/(d) the search's final check). Reported per row:
theorems proved, wall and CPU seconds per theorem (this process and its Coq and ATP processes, read from
``/proc``: :class:`DescendantCPU`). The
``ratio:`` line is (d)'s best / the best of (a) and (b), theorems proved.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from _bench import SMOKE_ROOT, add_smoke, div, need_coq, ratio, smoke_assets

AUTOMATION = ("lia", "nia", "lra", "nra", "ring", "field", "auto", "easy", "tauto", "intuition")
"""Coq's one-shot automation for miniF2F's nat / Z / R statements (``interval`` is not packaged for 8.16)"""
AUTOMATION_HEADER = "From Coq Require Import Lia Lra Psatz Ring Field ArithRing.\n"
"""the automation's own libraries, loaded after each header: a tactic that is not loaded would make the whole
``solve [...]`` of the combination fail to parse"""
HAMMER_TACTICS_HEADER = "From Hammer Require Import Tactics.\n"


def hammer_header(atp_seconds: int) -> str:
    return f"From Hammer Require Import Hammer.\nSet Hammer ATPLimit {atp_seconds}.\n"


class WithAutomation:
    """A tactic policy whose proposals at every state are the automation tactics (first, log-probability 0:
    the engine tries them before the model's) and then the model's own."""

    def __init__(self, policy: Any, tactics: tuple[str, ...]):
        self.policy, self.tactics = policy, tactics
        self.name = f"{getattr(policy, 'name', 'policy')}+automation"

    def _with(self, proposals: list[Any]) -> list[Any]:
        from proofrl.policy.tactic import Proposal

        fixed = [Proposal(t, 0.0, 0.0, 1) for t in self.tactics]
        return fixed + [p for p in proposals if p.tactic not in self.tactics]

    def propose(self, state_text: str, k: int) -> list[Any]:
        return self._with(self.policy.propose(state_text, k))

    def propose_many(self, states: list[str], k: int) -> list[list[Any]]:
        from proofrl.policy.tactic import propose_batch

        return [self._with(p) for p in propose_batch(self.policy, states, k)]


class DescendantCPU:
    """CPU seconds of this process plus those of its descendants (coqc, coqidetop, the ATPs), read from
    ``/proc`` every ``interval`` seconds while a row runs: the sandbox's extra process level keeps the Coq
    processes out of ``RUSAGE_CHILDREN``. A process's last ``interval`` before it exits is missed, so the
    figure is a lower bound."""

    def __init__(self, interval: float = 0.1):
        self.interval, self.seen, self._stop = interval, {}, threading.Event()
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


def with_header(problem: Any, extra: str) -> Any:
    return replace(problem, header=problem.header.rstrip("\n") + "\n" + extra)


def one_shot(problems: list[Any], script: str, header: str, seconds: float, workers: int) -> list[dict[str, Any]]:
    """``script`` as each theorem's whole proof through a fresh ``coqc`` under ``seconds``."""
    from proofrl.provers.coq.prover import CoqConfig, coqc_check

    config = CoqConfig(timeout=seconds)

    def run(p: Any) -> dict[str, Any]:
        q = with_header(p, header)
        t0 = time.monotonic()
        v = coqc_check(q.theorem, script, config, timeout=seconds)
        return {
            "name": p.name,
            "proved": v.valid,
            "status": v.status.value,
            "reason": "; ".join(v.reasons)[:200],
            "seconds": round(time.monotonic() - t0, 2),
            "proof": script if v.valid else "",
        }

    with ThreadPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(run, problems))


def searched(
    problems: list[Any],
    policy: Any,
    recipe: str,
    header: str,
    seconds: float,
    workers: int,
    out: Path,
    tactic_timeout: float,
    width: int,
) -> list[dict[str, Any]]:
    from proofrl.search.config import load_search_config
    from proofrl.search.run import search_many

    budgets = {
        "best_first.max_expansions": None,
        "best_first.seconds": seconds,
        "best_first.width": width,
        "best_first.tactic_timeout": tactic_timeout,
        "mcts.max_steps": 10**6,
        "mcts.max_nodes": 10**6,
        "mcts.seconds": seconds,
        "mcts.num_samples": width,
        "mcts.tactic_timeout": tactic_timeout,
    }
    cfg = load_search_config(recipe, **budgets)
    probs = [with_header(p, header) for p in problems]
    results = search_many(probs, policy, out_dir=out, workers=workers, config=cfg, progress=False)
    return [
        {
            "name": r.name,
            "proved": r.status == "proved",
            "status": str(r.status),
            "reason": r.reason[:200],
            "seconds": round(r.seconds, 2),
            "proof": r.proof if r.status == "proved" else "",
        }
        for r in results
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--data",
        type=Path,
        default=None,
        help="miniF2F-rocq JSONL (name, split, header, formal_statement), "
        "or a library corpus split: coq-lib:mathcomp:test (see docs/corpora.md)",
    )
    ap.add_argument("--split", action="append", default=None, help="test and/or valid (repeatable; default test)")
    ap.add_argument(
        "--theorems",
        type=int,
        default=20,
        help="N theorems of each split that compile with this Coq, drawn with --seed",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=20.0, help="wall-clock budget per theorem, every row")
    ap.add_argument("--policy", default=None, help="tactic model for (c)/(d): hf:DIR (default: the tiny smoke model)")
    ap.add_argument("--width", type=int, default=4, help="tactics the model proposes per node")
    ap.add_argument("--atp-seconds", type=int, default=5, help="hammer: seconds per ATP")
    ap.add_argument("--workers", type=int, default=2, help="theorems at once (Coq processes)")
    ap.add_argument("--rows", default="a,b,c,d", help="which rows to run")
    ap.add_argument("--out", type=Path, default=Path("runs/provers-bench"))
    add_smoke(ap)
    args = ap.parse_args()
    need_coq()
    import torch

    torch.set_num_threads(1)
    from proofrl.problems import Problem, load_problems

    splits = args.split or ["test"]
    if args.smoke:
        args.theorems, args.seconds, args.workers, args.width, args.out = 2, 3.0, 1, 2, SMOKE_ROOT / "provers"
        args.atp_seconds = 1
    problems: list[Problem] = []
    if args.data is not None and str(args.data).startswith("coq-lib:"):  # a library corpus' held-out lemmas
        from proofrl.data.splits import problem_set

        ok = problem_set(str(args.data))
        problems = sorted(random.Random(args.seed).sample(ok, min(args.theorems, len(ok))), key=lambda p: p.name)
        splits = [str(args.data)]
    elif args.data is not None:
        if not args.data.is_file():
            ap.error(f"no file {args.data}")
        for split in splits:
            ok = [p for p in load_problems(args.data, split=split) if p.extra.get("compiles_with_coq_8_16", True)]
            problems += sorted(random.Random(args.seed).sample(ok, min(args.theorems, len(ok))), key=lambda p: p.name)
    elif args.smoke:  # miniF2F-style statements of the kinds the benchmark has, made here
        problems = [
            Problem("smoke_nat", "Theorem smoke_nat : forall n : nat, n + 0 = n.", split="test"),
            Problem(
                "smoke_r",
                "Theorem smoke_r : forall x : R, x + 1 > x.",
                "Require Import Reals.\nOpen Scope R_scope.\n",
                split="test",
            ),
        ]
    else:
        ap.error("--data is required (or --smoke)")
    rows = set(args.rows.split(","))
    automation = ("lia", "lra", "intuition") if args.smoke else AUTOMATION
    has_hammer = _hammer_installed()
    load = os.getloadavg()
    print(
        f"{len(problems)} theorems ({', '.join(splits)}), {args.seconds:g} s each, {args.workers} workers, "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        flush=True,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    table: dict[str, dict[str, Any]] = {}

    def record(row: str, results: list[dict[str, Any]], wall: float, cpu: float) -> None:
        n = max(1, len(results))
        table[row] = {
            "proved": sum(r["proved"] for r in results),
            "theorems": len(results),
            "wall_s_per_theorem": round(wall / n, 2),
            "cpu_s_per_theorem": round(cpu / n, 2),
            "proved_names": sorted(r["name"] for r in results if r["proved"]),
        }
        with open(args.out / "results.jsonl", "a", encoding="utf-8") as f:
            for r in results:
                f.write(json.dumps({"row": row, **r}) + "\n")
        t = table[row]
        print(
            f"{row}: {t['proved']}/{t['theorems']} proved, {t['wall_s_per_theorem']} s wall, "
            f"{t['cpu_s_per_theorem']} s CPU per theorem",
            flush=True,
        )

    def timed(fn: Any, *a: Any, **kw: Any) -> tuple[list[dict[str, Any]], float, float]:
        w0 = time.monotonic()
        with DescendantCPU() as cpu:
            res = fn(*a, **kw)
        return res, time.monotonic() - w0, cpu.seconds

    (args.out / "results.jsonl").write_text("")
    singles: dict[str, int] = {}
    if "a" in rows:
        for tac in automation:
            res, w, c = timed(one_shot, problems, f"intros; {tac}.", AUTOMATION_HEADER, args.seconds, args.workers)
            record(f"(a) {tac}", res, w, c)
            singles[tac] = table[f"(a) {tac}"]["proved"]
        union = {n for t in automation for n in table[f"(a) {t}"]["proved_names"]}
        print(f"(a) any one tactic (union, {len(automation)} runs): {len(union)}", flush=True)
        order = sorted(automation, key=lambda t: (-singles[t], automation.index(t)))
        share = max(1, math.floor(args.seconds / len(order)))
        combo = "intros; solve [ " + " | ".join(f"timeout {share} {t}" for t in order) + " ]."
        res, w, c = timed(one_shot, problems, combo, AUTOMATION_HEADER, args.seconds, args.workers)
        record("(a) best combination", res, w, c)
        table["(a) best combination"]["script"] = combo
    if "b" in rows:
        if not has_hammer:
            print("(b) skipped: CoqHammer is not installed (apt-get install libcoq-hammer eprover z3 cvc4)", flush=True)
        else:
            res, w, c = timed(
                one_shot,
                problems,
                "intros; sauto.",
                AUTOMATION_HEADER + HAMMER_TACTICS_HEADER,
                args.seconds,
                args.workers,
            )
            record("(b) sauto", res, w, c)
            res, w, c = timed(
                one_shot,
                problems,
                "intros; hammer.",
                AUTOMATION_HEADER + hammer_header(args.atp_seconds),
                args.seconds,
                args.workers,
            )
            record("(b) hammer", res, w, c)
    if rows & {"c", "d"}:
        from proofrl.policy.tactic import make_tactic_policy

        spec = args.policy or smoke_assets().policy_spec
        policy = make_tactic_policy(spec)
        auto = tuple(f"intros; {t}." for t in automation) + (("intros; sauto.",) if has_hammer else ())
        header_d = AUTOMATION_HEADER + (HAMMER_TACTICS_HEADER if has_hammer else "")
        for engine, recipe in (("best-first", "reprover"), ("MCTS", "reap")):
            if "c" in rows:
                res, w, c = timed(
                    searched,
                    problems,
                    policy,
                    recipe,
                    AUTOMATION_HEADER,
                    args.seconds,
                    args.workers,
                    args.out / f"c-{recipe}",
                    min(5.0, args.seconds),
                    args.width,
                )
                record(f"(c) {engine}", res, w, c)
            if "d" in rows:
                res, w, c = timed(
                    searched,
                    problems,
                    WithAutomation(policy, auto),
                    recipe,
                    header_d,
                    args.seconds,
                    args.workers,
                    args.out / f"d-{recipe}",
                    min(5.0, args.seconds),
                    args.width,
                )
                record(f"(d) {engine} + automation", res, w, c)
    report = {
        "theorems": len(problems),
        "splits": splits,
        "seconds_per_theorem": args.seconds,
        "workers": args.workers,
        "load_average": [round(x, 2) for x in load],
        "rows": table,
    }
    (args.out / "report.json").write_text(json.dumps(report, indent=2))
    print(markdown(table))
    base = max([t["proved"] for r, t in table.items() if r.startswith(("(a)", "(b)"))] or [math.nan])
    best_d = max([t["proved"] for r, t in table.items() if r.startswith("(d)")] or [math.nan])
    ratio("(d) best / best of (a),(b) theorems proved", div(best_d, base))


def markdown(table: dict[str, dict[str, Any]]) -> str:
    lines = ["| row | proved | wall s / theorem | CPU s / theorem |", "|---|---|---|---|"]
    for row, t in table.items():
        lines.append(
            f"| {row} | {t['proved']}/{t['theorems']} | {t['wall_s_per_theorem']} | {t['cpu_s_per_theorem']} |"
        )
    return "\n".join(lines)


def _hammer_installed() -> bool:
    from proofrl.data.corpus import user_contrib

    return (user_contrib() / "Hammer").is_dir()


if __name__ == "__main__":
    main()
