"""Time per whole-proof RL step, split into generation / verification / update, on the tiny model with Coq.

    python benchmarks/rl_step.py --model runs/demo/whole-proof/sft-model --steps 4
    python benchmarks/rl_step.py --steps 4            # builds and briefly teaches a tiny model first
    # generation much slower than verification:
    python benchmarks/rl_step.py --steps 3 --model-size 384:4 --sft-epochs 1 --sft-problems 200
    python benchmarks/rl_step.py --smoke              # 4 prompts x 2 samples, one step each: seconds

Each step of the ``demo`` recipe (16 problems × G samples) is timed by the trainer itself:

* generation — wall time inside ``generator.generate`` (chunks of ``rollout.chunk_prompts`` prompts);
* verification — wall time the verifier was busy on the step's proofs, and the part of it that was *not*
  hidden behind generation (the wait after the last chunk): ``hidden = 1 − wait / busy``;
* update — π_old/π_ref recomputation + K PPO epochs.

The same steps run twice from the same model, side by side (the two trainers step in turn): overlapped
(``rollout.overlap=true``: chunks of ``rollout.chunk_prompts`` prompts, verified while the next chunk is generated) and
serial (``rollout.overlap=false``: generate everything in one call, then verify). ``--model-size HIDDEN:LAYERS`` teaches
a larger tiny model instead, whose generation is much slower than the verification of what it writes: the shape of a GPU
policy beside CPU verifiers. The ``ratio:`` lines are overlapped / serial median step time, and the same for the rollout
alone (generation and the wait for verdicts: what the schedule changes; the update's time varies with the batch, not the
schedule).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

import torch
from _bench import add_smoke, need_coq, ratio


def taught_model(out: Path, epochs: int, size: str | None = None, limit: int | None = None) -> Path:
    from proofrl.demo import demo_config, demo_problems
    from proofrl.demo.whole_proof import MODEL, SFT_BATCH, SFT_LR
    from proofrl.policy.model import load_policy
    from proofrl.policy.prompts import get_format
    from proofrl.policy.sft import supervised_finetune
    from proofrl.policy.tiny import build_tiny_model

    train, _ = demo_problems(demo_config())
    train = train[:limit]
    fmt = get_format("coq")
    shape = dict(MODEL)
    if size:
        shape["hidden"], shape["layers"] = (int(x) for x in size.split(":"))
    path = build_tiny_model(out / "tiny", [fmt.prompt(p) + fmt.completion(p, p.proof) for p in train], **shape)
    model, tok = load_policy(path, device="cpu")
    supervised_finetune(
        model,
        tok,
        [(fmt.prompt(p, tok), fmt.completion(p, p.proof)) for p in train],
        epochs=epochs,
        lr=SFT_LR,
        batch=SFT_BATCH,
        seed=0,
    )
    model.save_pretrained(out / "taught")
    tok.save_pretrained(out / "taught")
    return out / "taught"


def run(model_path: Path, steps: int, schedules: dict[str, list[str]], out: Path) -> dict[str, list[dict[str, float]]]:
    """One trainer per schedule from the same model, stepped in turn (the order flipped every step), so a
    change in the machine's load reaches every schedule alike; each step's metrics, by schedule."""
    from proofrl.train.config import load_recipe
    from proofrl.train.whole_proof import build_trainer

    trainers = {}
    try:
        for label, overrides in schedules.items():
            cfg = load_recipe(
                "demo",
                [
                    f"model.path={model_path}",
                    f"steps={steps}",
                    f"out={out / label}",
                    "data.eval=",
                    "checkpoint_every=1000",
                    *overrides,
                ],
            )
            trainers[label] = build_trainer(cfg)
        rows: dict[str, list[dict[str, float]]] = {label: [] for label in schedules}
        for step in range(steps):
            for label in list(trainers)[:: 1 if step % 2 == 0 else -1]:
                rows[label].append(trainers[label].train_step())
                trainers[label].step += 1
        return rows
    finally:
        for t in trainers.values():
            t.verifier.close()


def median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r.get(key, 0.0) for r in rows)


def summarise(label: str, rows: list[dict[str, float]]) -> None:
    med = lambda k: median(rows, k)  # noqa: E731
    step, gen, busy, wait, upd = (
        med(k) for k in ("time/step_s", "time/generate_s", "time/verify_busy_s", "time/verify_wait_s", "time/update_s")
    )
    print(
        f"{label}: step {step:.2f}s = generate {gen:.2f}s + verify wait {wait:.2f}s + update {upd:.2f}s "
        f"(+ rewards/bookkeeping {max(0.0, step - gen - wait - upd):.2f}s)"
    )
    print(
        f"  verification busy {busy:.2f}s, hidden behind generation {100 * med('time/verify_hidden'):.0f}%; "
        f"{med('gen/tokens_per_s'):.0f} tokens/s; {med('verify/distinct'):.0f} distinct proofs judged per step"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--model", type=Path, help="a taught tiny model (e.g. runs/demo/whole-proof/sft-model); built if absent"
    )
    ap.add_argument(
        "--model-size", metavar="HIDDEN:LAYERS", help="build and teach a larger tiny model (default: the demo's)"
    )
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--sft-epochs", type=int, default=6, help="teaching epochs when the model is built here")
    ap.add_argument(
        "--sft-problems", type=int, default=None, help="teach on the first N training theorems (default: all)"
    )
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the demo's default: 1)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="recipe override key=value")
    add_smoke(ap)
    args = ap.parse_args()
    need_coq()
    limit = args.sft_problems
    if args.smoke:
        args.steps, args.sft_epochs, limit = 1, 1, 64
        args.overrides = [
            "rollout.problems_per_step=4",
            "rollout.group_size=2",
            "rollout.max_tokens=16",
            "rollout.chunk_prompts=2",
            *args.overrides,
        ]
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        model = args.model or taught_model(tmpd, args.sft_epochs, args.model_size, limit)
        rows = run(
            model,
            args.steps,
            {
                "overlapped": [*args.overrides, "rollout.overlap=true"],
                "serial": [*args.overrides, "rollout.overlap=false"],
            },
            tmpd,
        )
        overlapped, serial = rows["overlapped"], rows["serial"]
    chunk = next((o.split("=", 1)[1] for o in reversed(args.overrides) if o.startswith("rollout.chunk_prompts=")), "4")
    print(
        f"demo recipe, {args.steps} steps (median per step), model {args.model or args.model_size or 'the demo size'}, "
        f"torch threads {args.threads}, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    summarise(f"overlapped (chunks of {chunk} prompts)", overlapped)
    summarise("serial (generate all, then verify)", serial)
    ratio("overlapped/serial step time", median(overlapped, "time/step_s") / median(serial, "time/step_s"))
    rollout = lambda rows: statistics.median(r["time/generate_s"] + r["time/verify_wait_s"] for r in rows)  # noqa: E731
    ratio("overlapped/serial rollout time (generate + wait for verdicts)", rollout(overlapped) / rollout(serial))


if __name__ == "__main__":
    main()
