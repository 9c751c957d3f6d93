"""miniF2F-rocq: Coq's own automation, CoqHammer and proofrl's search, side by side in one run.

    PROOFRL_COQ_LIBS=1 bash scripts/setup.sh         # CoqHammer, eprover, z3, cvc4 (and MathComp, std++)
    python benchmarks/provers.py --data minif2f.jsonl --split test --theorems 20 --seconds 20 --workers 2
    python benchmarks/provers.py --data coq-lib:mathcomp:test --theorems 10 --policy hf:MODEL
    python benchmarks/provers.py --smoke             # 2 theorems, 3 s each, 3 tactics, the tiny smoke model

The rows and how they are measured: :mod:`proofrl.eval.provers` (``proofrl eval search`` runs the same). The
``ratio:`` line is (d)'s best / the best of (a) and (b), theorems proved.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from _bench import SMOKE_ROOT, add_smoke, need_coq, ratio, smoke_assets


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--data",
        default=None,
        help="miniF2F-rocq JSONL (name, split, header, formal_statement), "
        "or a library corpus split: coq-lib:mathcomp:test (see docs/corpora.md)",
    )
    ap.add_argument("--split", action="append", default=None, help="test and/or valid (repeatable; default test)")
    ap.add_argument(
        "--theorems", type=int, default=20, help="N theorems of each split that compile here, drawn with --seed"
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
    from proofrl.errors import ConfigError
    from proofrl.eval import provers as rows_lib

    if args.smoke:
        args.theorems, args.seconds, args.workers, args.width, args.out = 2, 3.0, 1, 2, SMOKE_ROOT / "provers"
        args.atp_seconds = 1
    try:
        rows = rows_lib.parse_list(args.rows, rows_lib.ROWS, "row(s) in --rows")
        if "b" in rows and not rows_lib.hammer_installed():
            print("(b) skipped: CoqHammer is not installed (apt-get install libcoq-hammer eprover z3 cvc4)", flush=True)
            rows = tuple(r for r in rows if r != "b")
        if args.data is not None:
            splits = [None] if args.data.startswith("coq-lib:") else args.split or ["test"]
            problems, labels = [], []
            for split in splits:
                got, label = rows_lib.select_problems(args.data, split=split, limit=args.theorems, seed=args.seed)
                problems += got
                labels.append(label)
        elif args.smoke:
            problems, labels = rows_lib.smoke_problems(), ["smoke"]
        else:
            ap.error("--data is required (or --smoke)")
        settings = rows_lib.RowsConfig(
            rows=rows,
            seconds=args.seconds,
            workers=args.workers,
            tactics=rows_lib.SMOKE_TACTICS if args.smoke else rows_lib.AUTOMATION,
            width=args.width,
            atp_seconds=args.atp_seconds,
            policy=args.policy or (smoke_assets().policy_spec if set(rows) & {"c", "d"} else ""),
        )
        rows_lib.check_settings(settings)
    except ConfigError as e:
        print(f"{Path(__file__).name}: {e}", file=sys.stderr)
        sys.exit(2)
    load0 = rows_lib.loadavg()
    print(
        f"{len(problems)} theorems ({', '.join(labels)}), {args.seconds:g} s each, {args.workers} workers, "
        f"load average {load0}",
        flush=True,
    )
    ran = rows_lib.run_rows(problems, settings, args.out, progress=False)
    command = " ".join(["python", "benchmarks/provers.py", *sys.argv[1:]])
    load = {"before": load0, "after": rows_lib.loadavg()}
    summary = rows_lib.write_report(
        args.out, ran, label=", ".join(labels), settings=settings, command=command, load=load
    )
    print(rows_lib.markdown(ran))
    ratio("(d) best / best of (a),(b) theorems proved", summary["ratio_d_over_a_b"])


if __name__ == "__main__":
    os.environ.setdefault("TQDM_DISABLE", "1")
    main()
