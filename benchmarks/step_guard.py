"""What the step channel's kernel checks cost: Coq stdlib human proofs stepped tactic by tactic, side by side on
three provers of the same header, each theorem on all three in turn (the order rotated):

* ``none``    — ``CoqProver.step`` without the checks (a subclass whose two checks answer "accepted");
* ``shipped`` — ``CoqProver.step`` as shipped: ``Qed`` and the judge's audit once the goals run out (then back
  to the state), and, after a step that closed a goal while others remain, the partial term's assumptions
  (``Show Proof``, each name's ``Print Assumptions`` kept for the session) and ``Guarded.`` after a scratch
  ``repeat intro``;
* ``guarded`` — not shipped, for comparison: no checks, and a ``Guarded.`` query after every step (what asking
  after every step would cost; it also fails honest prefixes such as ``fix IH 1.``, so its answer is unused).

    python benchmarks/step_guard.py                  # 60 theorems of the core stdlib modules
    python benchmarks/step_guard.py --theorems 200
    python benchmarks/step_guard.py --smoke          # 3 theorems: seconds

Printed: per variant the steps, the closing steps, seconds per step (mean over all steps of all stepped
theorems) and the extra milliseconds per step and per closing step (no goals left) over ``none``; ``ratio:``
lines are each variant's seconds per step over ``none``'s; the count of each check ``shipped`` asked. Every
stepped human proof must close under ``shipped`` (a refused honest proof is a false rejection, counted and
listed).
"""

from __future__ import annotations

import argparse
import contextlib
import time

from _bench import add_smoke, div, need_coq, ratio


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--theorems", type=int, default=60, help="stdlib theorems, spread over the core modules")
    ap.add_argument("--max-proof-chars", type=int, default=1500)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per tactic")
    ap.add_argument("--repeats", type=int, default=2, help="times each proof is stepped on each prover")
    add_smoke(ap)
    a = ap.parse_args()
    need_coq()
    if a.smoke:
        a.theorems, a.repeats = 3, 1

    from proofrl.data.tactics import proof_tactics, stdlib_tactic_problems
    from proofrl.provers.coq.prover import CoqProver
    from proofrl.provers.coq.session import CoqFailure

    class Unchecked(CoqProver):
        def _kernel_refuses(self, s, new, before, tactics, timeout):  # the baseline: no question asked
            return None

        def _closing_refused(self, s, new, before, timeout):
            return None

    class GuardedEveryStep(Unchecked):
        def step(self, state, tactic, *, timeout=None):
            r = super().step(state, tactic, timeout=timeout)
            if r.ok and r.state is not None:
                with contextlib.suppress(CoqFailure):
                    self._session.query("Guarded.", r.state.handle, timeout=a.timeout)
            return r

    asked = {"qed": 0, "closing": 0}
    inside = {"qed": 0.0, "closing": 0.0}  # seconds spent in each check (all of shipped's runs)

    class Shipped(CoqProver):  # CoqProver itself, counting and timing its checks
        def _kernel_refuses(self, *args):
            t0 = time.perf_counter()
            try:
                return super()._kernel_refuses(*args)
            finally:
                asked["qed"] += 1
                inside["qed"] += time.perf_counter() - t0

        def _closing_refused(self, *args):
            t0 = time.perf_counter()
            try:
                return super()._closing_refused(*args)
            finally:
                asked["closing"] += 1
                inside["closing"] += time.perf_counter() - t0

    variants = {"none": Unchecked, "shipped": Shipped, "guarded": GuardedEveryStep}
    pool = stdlib_tactic_problems(max_proof_chars=a.max_proof_chars)
    problems = pool[:: max(1, len(pool) // a.theorems)][: a.theorems]
    problems.sort(key=lambda p: p.header)  # one set of provers per header
    seconds = {v: 0.0 for v in variants}
    steps = {v: 0 for v in variants}
    closing = {v: 0 for v in variants}
    refused: list[str] = []
    shipped_steps = [0]  # every step shipped ran (the checks' time is over all of them)
    provers: dict[str, CoqProver] = {}
    header = None
    stepped = 0
    t_all = time.monotonic()
    for i, prob in enumerate(problems):
        if prob.header != header:
            for p in provers.values():
                p.close()
            header = prob.header
            provers = {v: cls(header) for v, cls in variants.items()}
        try:
            tactics = proof_tactics(prob.proof)
        except Exception:  # an unsplittable proof is skipped on every side alike
            continue
        names = list(variants)
        order = [v for k in range(a.repeats) for v in (names[(i + k) % 3 :] + names[: (i + k) % 3])]
        runs: dict = {}
        for v in order:
            p = provers[v]
            try:
                st = p.start(prob.theorem, timeout=a.timeout)
            except Exception:
                runs[v] = (0.0, 0, 0, False)
                continue
            took, n, closed, ok = 0.0, 0, 0, True
            for tac in tactics:
                t0 = time.perf_counter()
                r = p.step(st, tac, timeout=a.timeout)
                took += time.perf_counter() - t0
                n += 1
                if not r.ok:
                    ok = False
                    if v == "shipped" and r.failure.kind.value == "kernel":
                        refused.append(f"{prob.name}: {r.failure.message[:120]}")
                    break
                closed += r.state.solved
                st = r.state
            if v == "shipped":
                shipped_steps[0] += n
            old = runs.get(v) or (0.0, 0, 0, True)
            runs[v] = (old[0] + took, old[1] + n, old[2] + closed, old[3] and ok and st.solved)
        if not (runs["none"][3] and runs["shipped"][3]):
            continue  # only proofs that step through cleanly without the check are compared
        stepped += 1
        for v, (took, n, closed, _) in runs.items():
            seconds[v] += took
            steps[v] += n
            closing[v] += closed
    for p in provers.values():
        p.close()
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(
        f"theorems stepped through: {stepped} of {len(problems)}, {a.repeats} time(s) on each prover; "
        f"{time.monotonic() - t_all:.1f}s; loadavg {' '.join(load)}"
    )
    print(f"{'variant':8} {'steps':>6} {'closing':>7} {'ms/step':>8} {'+ms/step':>9} {'+ms/closing step':>17}")
    base = div(seconds["none"], steps["none"])
    for v in variants:
        per = div(seconds[v], steps[v])
        extra = (seconds[v] - seconds["none"]) * 1000
        print(
            f"{v:8} {steps[v]:6d} {closing[v]:7d} {per * 1000:8.2f} {extra / max(1, steps[v]):9.2f} "
            f"{div(extra, closing[v]):17.2f}"
        )
    all_steps = max(1, shipped_steps[0])
    print(
        f"checks asked by shipped: Qed and audit {asked['qed']} ({div(inside['qed'], asked['qed']) * 1000:.2f} ms "
        f"each), axioms and guard after a step that closed a goal with goals left {asked['closing']} "
        f"({div(inside['closing'], asked['closing']) * 1000:.2f} ms each); time inside the checks per step of "
        f"shipped: {(inside['qed'] + inside['closing']) / all_steps * 1000:.2f} ms "
        f"over {shipped_steps[0]} steps"
    )
    print(f"honest proofs refused by the kernel check: {len(refused)}")
    for line in refused[:10]:
        print("  " + line)
    ratio("shipped_over_none_seconds_per_step", div(div(seconds["shipped"], steps["shipped"]), base))
    ratio("guarded_every_step_over_none_seconds_per_step", div(div(seconds["guarded"], steps["guarded"]), base))


if __name__ == "__main__":
    main()
