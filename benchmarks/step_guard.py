"""What the step channel's kernel check costs: Coq stdlib human proofs stepped tactic by tactic, side by side on
three provers of the same header, each theorem on all three in turn (the order rotated):

* ``none``    — ``CoqProver.step`` without the check (a subclass whose kernel check answers "accepted");
* ``qed``     — ``CoqProver.step`` as shipped: ``Qed`` once the goals run out, then back to the state;
* ``guarded`` — not shipped, for comparison: a ``Guarded.`` query after every step (what asking after every
  step would cost; it also fails honest prefixes such as ``fix IH 1.``, so its answer is not used).

    python benchmarks/step_guard.py                  # 60 theorems of the core stdlib modules
    python benchmarks/step_guard.py --theorems 200
    python benchmarks/step_guard.py --smoke          # 3 theorems: seconds

Printed: per variant the steps, the closing steps, seconds per step (mean over all steps of all stepped
theorems) and the extra milliseconds per step and per closing step over ``none``; ``ratio:`` lines are each
variant's seconds per step over ``none``'s. Every stepped human proof must close under ``qed`` (a refused
honest proof is a false rejection and is counted and listed).
"""

from __future__ import annotations

import argparse
import time

from _bench import add_smoke, div, need_coq, ratio


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--theorems", type=int, default=60, help="stdlib theorems, spread over the core modules")
    ap.add_argument("--max-proof-chars", type=int, default=1500)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per tactic")
    add_smoke(ap)
    a = ap.parse_args()
    need_coq()
    if a.smoke:
        a.theorems = 3

    from proofrl.data.tactics import proof_tactics, stdlib_tactic_problems
    from proofrl.provers.coq.prover import CoqProver
    from proofrl.provers.coq.session import CoqFailure

    class Unchecked(CoqProver):
        def _kernel_refuses(self, s, new, before, timeout):  # noqa: ANN001 - the baseline: no question asked
            return None

    class GuardedEveryStep(Unchecked):
        def step(self, state, tactic, *, timeout=None):  # noqa: ANN001
            r = super().step(state, tactic, timeout=timeout)
            if r.ok and r.state is not None:
                try:
                    self._session.query("Guarded.", r.state.handle, timeout=a.timeout)
                except CoqFailure:
                    pass
            return r

    variants = {"none": Unchecked, "qed": CoqProver, "guarded": GuardedEveryStep}
    pool = stdlib_tactic_problems(max_proof_chars=a.max_proof_chars)
    problems = pool[:: max(1, len(pool) // a.theorems)][: a.theorems]
    problems.sort(key=lambda p: p.header)  # one set of provers per header
    seconds = {v: 0.0 for v in variants}
    steps = {v: 0 for v in variants}
    closing = {v: 0 for v in variants}
    refused: list[str] = []
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
        except Exception:  # noqa: BLE001 - an unsplittable proof is skipped on every side alike
            continue
        names = list(variants)
        order = names[i % 3:] + names[: i % 3]
        runs = {}
        for v in order:
            p = provers[v]
            try:
                st = p.start(prob.theorem, timeout=a.timeout)
            except Exception:  # noqa: BLE001
                runs[v] = None
                continue
            took, n, closed, ok = 0.0, 0, 0, True
            for tac in tactics:
                t0 = time.perf_counter()
                r = p.step(st, tac, timeout=a.timeout)
                took += time.perf_counter() - t0
                n += 1
                if not r.ok:
                    ok = False
                    if v == "qed" and r.failure.kind.value == "kernel":
                        refused.append(f"{prob.name}: {r.failure.message[:120]}")
                    break
                closed += r.state.solved
                st = r.state
            runs[v] = (took, n, closed, ok and st.solved)
        if any(runs[v] is None or not runs[v][3] for v in ("none", "qed")):
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
    print(f"theorems stepped through: {stepped} of {len(problems)}; {time.monotonic() - t_all:.1f}s; loadavg {' '.join(load)}")
    print(f"{'variant':8} {'steps':>6} {'closing':>7} {'ms/step':>8} {'+ms/step':>9} {'+ms/closing step':>17}")
    base = div(seconds["none"], steps["none"])
    for v in variants:
        per = div(seconds[v], steps[v])
        extra = (seconds[v] - seconds["none"]) * 1000
        print(f"{v:8} {steps[v]:6d} {closing[v]:7d} {per * 1000:8.2f} {extra / max(1, steps[v]):9.2f} {div(extra, closing[v]):17.2f}")
    print(f"honest proofs refused by the kernel check: {len(refused)}")
    for line in refused[:10]:
        print("  " + line)
    ratio("qed_over_none_seconds_per_step", div(div(seconds["qed"], steps["qed"]), base))
    ratio("guarded_every_step_over_none_seconds_per_step", div(div(seconds["guarded"], steps["guarded"]), base))


if __name__ == "__main__":
    main()
