"""Time and peak memory of one GRPO update: proofrl's against TRL's ``GRPOTrainer`` loss, same model, same batch.

    pip install trl                  # for this benchmark only; trl is not a dependency of proofrl
    python benchmarks/update_step.py                     # the tiny Llama (proofrl/policy/tiny.py), CPU, fp32
    python benchmarks/update_step.py --rows 64 --tokens 256 --micro 16
    python benchmarks/update_step.py --model DIR --device cuda --dtype bfloat16   # any local HF causal LM
    python benchmarks/update_step.py --smoke         # 4 rows of <= 16 tokens, one repeat: seconds

Without trl installed it says so (a ``skipped:`` line) and exits 0.

What is timed, on each side, is one optimiser step over ``--rows`` rows given their π_old and π_ref log-probs
(both computed beforehand, outside the timing, as both trainers do): forward, loss, backward, gradient-norm
clipping to 1.0, AdamW. Both sides use micro-batches of ``--micro`` rows (one forward and one backward each),
token-mean aggregation (TRL's ``loss_type="bnpo"``, divided by its gradient-accumulation steps), PPO clip 0.2,
k3 KL with β = ``--kl``, temperature 1. proofrl runs :func:`proofrl.objectives.grpo.ppo_update` with the LM trainer's
log-prob function (:func:`proofrl.policy.logprobs.response_logprobs`); TRL runs ``GRPOTrainer.compute_loss``
(its fused, chunked LM head) inside the same loop.

Peak memory is measured as torch's own allocations made during the update (the live bytes' high-water mark,
relative to the update's start): on CUDA ``torch.cuda.max_memory_allocated``; on the CPU from the allocation
events of ``torch.profiler`` (``profile_memory=True``), in a separate, untimed run. Model weights and optimiser
state that exist before the update are not counted; AdamW's state is created before the measured step by a
warm-up update on each side.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from _bench import add_smoke, ratio, skip


def _batch(tok: Any, rows: int, group: int, prompt: int, tokens: int, seed: int) -> dict[str, Any]:
    g = torch.Generator().manual_seed(seed)
    vocab = len(tok)

    def ids(n: int) -> list[int]:
        return torch.randint(5, vocab, (n,), generator=g).tolist()

    prompts = [
        [tok.bos_token_id, *ids(int(torch.randint(prompt // 2, prompt, (1,), generator=g)))] for _ in range(rows)
    ]
    responses = [ids(int(torch.randint(tokens // 2, tokens + 1, (1,), generator=g))) for _ in range(rows)]
    rewards = torch.randint(0, 2, (rows,), generator=g).float()
    return {"prompts": prompts, "responses": responses, "rewards": rewards, "groups": torch.arange(rows) // group}


def _logps(model: Any, tok: Any, b: dict[str, Any], micro: int, width: int) -> torch.Tensor:
    from proofrl.policy.logprobs import response_logprobs
    from proofrl.train.whole_proof import pad_rows

    lp, _ = response_logprobs(model, b["prompts"], b["responses"], pad_id=tok.pad_token_id, micro_batch=micro)
    return pad_rows(lp, width)


def ours(model: Any, ref: Any, tok: Any, b: dict[str, Any], args: argparse.Namespace) -> Callable[[], None]:
    """One proofrl update: ppo_update over the batch with the trainer's log-prob function."""
    from proofrl.objectives.grpo import PPOConfig, RolloutBatch, group_advantages, ppo_update

    device = next(model.parameters()).device
    width = max(len(r) for r in b["responses"])
    mask = torch.tensor([[1.0] * len(r) + [0.0] * (width - len(r)) for r in b["responses"]], device=device)
    with torch.no_grad(), _autocast(args, device):
        old = _logps(model, tok, b, args.micro, width)
        ref_lp = _logps(ref, tok, b, args.micro, width)
    adv = group_advantages(b["rewards"].to(device), b["groups"].to(device))
    batch = RolloutBatch(old, adv, mask, ref_lp)
    cfg = PPOConfig(
        agg_mode="token-mean",
        kl_coef=args.kl,
        kl_kind="low_var_kl",
        max_grad_norm=1.0,
        shuffle=False,
        policy_loss="ppo-clip",
    )
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-6)

    def policy(rows: torch.Tensor) -> torch.Tensor:
        idx = rows.tolist()
        sub = {"prompts": [b["prompts"][i] for i in idx], "responses": [b["responses"][i] for i in idx]}
        with _autocast(args, device):
            return _logps(model, tok, sub, args.micro, width)

    return lambda: ppo_update(policy, batch, opt, cfg, micro_batch_rows=args.micro).loss


def trl_side(
    model: Any, ref: Any, tok: Any, b: dict[str, Any], args: argparse.Namespace, out: Path
) -> Callable[[], None]:
    """One TRL update: GRPOTrainer.compute_loss per micro-batch, backward, clip 1.0, AdamW."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    device = next(model.parameters()).device
    cfg = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=args.micro,
        num_generations=args.group,
        max_completion_length=args.tokens,
        beta=args.kl,
        loss_type="bnpo",
        temperature=1.0,
        epsilon=0.2,
        learning_rate=1e-6,
        max_grad_norm=1.0,
        report_to=[],
        logging_steps=1,
        use_cpu=device.type == "cpu",
        bf16=args.dtype == "bfloat16",
        save_strategy="no",
        gradient_checkpointing=False,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=lambda completions, **kw: [0.0] * len(completions),
        args=cfg,
        train_dataset=Dataset.from_list([{"prompt": "x"}] * args.rows),
        processing_class=tok,
    )
    trainer.current_gradient_accumulation_steps = -(-args.rows // args.micro)
    model = trainer.model
    model.train()  # as in TRL's own training step (the tiny Llama has no dropout: same function as eval mode)
    from proofrl.objectives.grpo import group_advantages
    from proofrl.policy.logprobs import left_pad, right_pad

    q_ids, q_mask = left_pad(b["prompts"], tok.pad_token_id, device)
    o_ids, o_mask = right_pad(b["responses"], tok.pad_token_id, device)
    width = o_ids.shape[1]
    with torch.no_grad(), _autocast(args, device):
        old = _logps(model, tok, b, args.micro, width)
        ref_lp = _logps(ref, tok, b, args.micro, width)
    adv = group_advantages(b["rewards"].to(device), b["groups"].to(device))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-6)
    params = [p for p in model.parameters() if p.requires_grad]

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for s in range(0, args.rows, args.micro):
            sl = slice(s, s + args.micro)
            inputs = {
                "prompt_ids": q_ids[sl],
                "prompt_mask": q_mask[sl],
                "completion_ids": o_ids[sl],
                "completion_mask": o_mask[sl],
                "advantages": adv[sl],
                "old_per_token_logps": old[sl],
                "ref_per_token_logps": ref_lp[sl],
            }
            loss = trainer.compute_loss(model, inputs)
            loss.backward()
            total += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return total

    return step


def _autocast(args: argparse.Namespace, device: torch.device) -> Any:
    import contextlib

    if args.dtype == "bfloat16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _peak_bytes(fn: Callable[[], None], device: torch.device) -> int:
    if device.type == "cuda":
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted(
        (e.start_ns(), e.nbytes())
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU
    )
    live = peak = 0
    for _, n in events:
        live += n
        peak = max(peak, live)
    return peak


def _seconds(fn: Callable[[], None], device: torch.device, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, default=None, help="a local HF causal LM (default: build the tiny Llama)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument(
        "--dtype",
        default="float32",
        choices=["float32", "bfloat16"],
        help="bfloat16: fp32 weights under bf16 autocast on both sides",
    )
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=64, help="prompt tokens (lengths drawn in [p/2, p))")
    ap.add_argument("--tokens", type=int, default=128, help="response tokens (lengths drawn in [t/2, t])")
    ap.add_argument("--micro", type=int, default=None, help="rows per forward/backward pass (default: --rows)")
    ap.add_argument("--kl", type=float, default=0.04)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    add_smoke(ap)
    args = ap.parse_args(argv)
    if args.smoke:
        args.rows, args.group, args.prompt, args.tokens, args.repeats, args.micro = 4, 2, 8, 16, 1, None
    args.micro = args.micro or args.rows
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        import trl
    except ImportError:
        skip("trl is not installed: `pip install trl` to run this comparison (it is not a proofrl dependency)")
    from proofrl.policy.model import load_policy
    from proofrl.policy.tiny import build_tiny_model, sample_corpus

    with tempfile.TemporaryDirectory() as tmp:
        path = args.model or build_tiny_model(Path(tmp) / "tiny", sample_corpus())
        device = torch.device(args.device)
        results = {}
        for side in ("proofrl", "trl"):
            torch.manual_seed(0)
            model, tok = load_policy(path, device=str(device), dtype=torch.float32)
            ref = copy.deepcopy(model).eval().requires_grad_(False)
            model.eval()  # no dropout on either side (the tiny Llama has none anyway)
            b = _batch(tok, args.rows, args.group, args.prompt, args.tokens, seed=1)
            fn = (
                ours(model, ref, tok, b, args)
                if side == "proofrl"
                else trl_side(model, ref, tok, b, args, Path(tmp) / "trl")
            )
            first = fn()  # warm-up: optimiser state, allocator, kernels
            results[side] = (_seconds(fn, device, args.repeats), _peak_bytes(fn, device), first)
            del model, ref, fn
            if device.type == "cuda":
                torch.cuda.empty_cache()
        n_params = sum(p.numel() for p in load_policy(path, device="cpu")[0].parameters())
    (t_ours, m_ours, l_ours), (t_trl, m_trl, l_trl) = results["proofrl"], results["trl"]
    print(
        f"update step: {n_params / 1e6:.2f}M-parameter model, {args.rows} rows × ≤{args.tokens} response tokens "
        f"(prompts < {args.prompt}), micro-batch {args.micro}, {args.dtype} on {args.device}, "
        f"torch {torch.__version__}, trl {trl.__version__}, {torch.get_num_threads()} thread(s)"
    )
    mem = "torch.cuda.max_memory_allocated" if device.type == "cuda" else "torch.profiler CPU allocation events"
    print(f"peak memory = high-water mark of bytes allocated during the update ({mem})")
    print(f"{'':10} {'time (median of ' + str(args.repeats) + ')':>24} {'peak memory':>14}")
    print(f"{'proofrl':10} {t_ours * 1e3:21.1f} ms {m_ours / 2**20:11.1f} MiB")
    print(f"{'trl':10} {t_trl * 1e3:21.1f} ms {m_trl / 2**20:11.1f} MiB")
    print(f"{'ours/trl':10} {t_ours / t_trl:23.2f}× {m_ours / max(m_trl, 1):12.2f}×")
    ratio("proofrl/trl update time", t_ours / t_trl)
    ratio("proofrl/trl peak memory", m_ours / max(m_trl, 1))
    print(
        f"loss of the first update (ρ = 1, π = π_ref): proofrl {l_ours:.6f}, trl {l_trl:.6f}"
        + ("" if args.micro == args.rows else " (TRL divides each micro-batch by its own token count)")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
