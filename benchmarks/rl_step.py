"""Time per whole-proof RL step, split into generation / verification / update, on the tiny model with Coq.

    python benchmarks/rl_step.py --model runs/demo/sft-model --steps 4
    python benchmarks/rl_step.py --steps 4            # builds and briefly teaches a tiny model first

Each step of the ``demo`` recipe (16 problems × G samples) is timed by the trainer itself:

* generation — wall time inside ``generator.generate`` (chunks of ``rollout.chunk_prompts`` prompts);
* verification — wall time the verifier was busy on the step's proofs, and the part of it that was *not*
  hidden behind generation (the wait after the last chunk): ``hidden = 1 − wait / busy``;
* update — π_old/π_ref recomputation + K PPO epochs.

It also runs one step with chunking off (``chunk_prompts`` = all prompts: generate everything, then verify)
for a side-by-side view of what the overlap buys.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import torch


def taught_model(out: Path, epochs: int) -> Path:
    from proofrl.demo import DemoConfig, demo_problems
    from proofrl.policy.sft import supervised_finetune
    from proofrl.policy.model import load_policy
    from proofrl.policy.prompts import get_format
    from proofrl.policy.tiny import build_tiny_model

    cfg = DemoConfig()
    train, _ = demo_problems(cfg)
    fmt = get_format("coq")
    path = build_tiny_model(out / "tiny", [fmt.prompt(p) + fmt.completion(p, p.proof) for p in train], **cfg.model)
    model, tok = load_policy(path, device="cpu")
    supervised_finetune(model, tok, [(fmt.prompt(p, tok), fmt.completion(p, p.proof)) for p in train],
                        epochs=epochs, lr=cfg.sft_lr, batch=cfg.sft_batch, seed=0)  # fmt: skip
    model.save_pretrained(out / "taught")
    tok.save_pretrained(out / "taught")
    return out / "taught"


def run(model_path: Path, steps: int, overrides: list[str], out: Path) -> list[dict[str, float]]:
    from proofrl.train.config import load_recipe
    from proofrl.train.run import build_trainer

    cfg = load_recipe("demo", [f"model.path={model_path}", f"steps={steps}", f"out={out}", "data.eval=",
                               "checkpoint_every=1000", *overrides])  # fmt: skip
    trainer = build_trainer(cfg)
    try:
        trainer.fit()
    finally:
        trainer.verifier.close()
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def summarise(label: str, rows: list[dict[str, float]]) -> None:
    med = lambda k: statistics.median(r.get(k, 0.0) for r in rows)  # noqa: E731
    step, gen, busy, wait, upd = (med(k) for k in ("time/step_s", "time/generate_s", "time/verify_busy_s",
                                                    "time/verify_wait_s", "time/update_s"))  # fmt: skip
    print(f"{label}: step {step:.2f}s = generate {gen:.2f}s + verify wait {wait:.2f}s + update {upd:.2f}s "
          f"(+ rewards/bookkeeping {max(0.0, step - gen - wait - upd):.2f}s)")  # fmt: skip
    print(f"  verification busy {busy:.2f}s, hidden behind generation {100 * med('time/verify_hidden'):.0f}%; "
          f"{med('gen/tokens_per_s'):.0f} tokens/s; {med('verify/distinct'):.0f} distinct proofs judged per step")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, help="a taught tiny model (e.g. runs/demo/sft-model); built if absent")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--sft-epochs", type=int, default=6, help="teaching epochs when the model is built here")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the demo's default: 1)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="recipe override key=value")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        model = args.model or taught_model(tmpd, args.sft_epochs)
        overlapped = run(model, args.steps, args.overrides, tmpd / "overlap")
        serial = run(model, args.steps, [*args.overrides, "rollout.chunk_prompts=1000"], tmpd / "serial")
    print(f"demo recipe, {args.steps} steps (median per step), torch threads {args.threads}, 2 Coq workers")
    summarise("overlapped (chunks of 4 prompts)", overlapped)
    summarise("serial (generate all, then verify)", serial)


if __name__ == "__main__":
    main()
