"""The trainer's update on a GPU, in one command: a 0.5B-shaped Qwen2 with random weights, a 256-row x 512-token
GRPO batch, proofrl's :meth:`~proofrl.train.whole_proof.Trainer.update` as a training run calls it.

    python benchmarks/gpu_check.py            # on a CUDA GPU (PyTorch, transformers, peft; no vLLM, Coq or network)
    python benchmarks/gpu_check.py --smoke    # CPU-sized: a tiny Qwen2, 8 rows x 16 tokens (CI)

The model is built here from a config (Qwen2.5-0.5B's shape: hidden 896, 24 layers, 14 query / 2 key-value heads,
MLP 4864, vocabulary 151936, tied embeddings; about 494 M parameters) with random weights, and the tokenizer is
proofrl's tiny byte-level BPE (:mod:`proofrl.policy.tiny`) trained on a few sentences: nothing is downloaded.
The completions are random token ids, the rewards random 0/1 in groups of 8: what is timed is the update, not
what it learns.

The update is the trainer's own path: bf16 autocast over fp32 master weights (``model.dtype: bfloat16``),
``micro_batch`` rows per forward and backward pass, gradient checkpointing, one PPO epoch, the k3 KL to a
reference that lives on the GPU (``model.ref_device: same``) or is parked in CPU memory and brought over for its
pass (``cpu``). For each placement it prints peak GPU memory, seconds per update (after one warm-up update)
and tokens per second, then a ``ratio:`` line (cpu-parked over same-device seconds). Where ``trl`` is
importable, the same batch goes through TRL's GRPO loss (``benchmarks/update_step.py``'s TRL side) for
comparison. Then one pass/fail line each:

* ``no device mismatch``: both placements ran, the parked reference is back on the CPU afterwards, every
  trainable weight and AdamW state tensor is on the GPU;
* ``weights move at lr 1e-6``: after one AdamW step at lr 1e-6, most fp32 master weights changed, by at most
  1e-5 (Adam's first step moves a weight by about lr), and the reference did not change;
* ``accumulation equals the full batch``: the gradient of the first groups taken in micro-batches equals the
  gradient in one pass, to 2e-2 relative L2 error under bf16 (8 mantissa bits: about 4e-3 per rounding; the two
  orders of summation round differently) and 1e-4 under fp32.

Exit status 0 when every check passes, 1 when one fails, 2 when this machine cannot run the check (one line:
no CUDA device without ``--smoke``, a GPU without bf16).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from _bench import add_smoke, ratio

QWEN2_0_5B = {
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "rope_theta": 1e6,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
}
"""Qwen2.5-0.5B's published shape"""
TINY_QWEN2 = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 1024,
    "rope_theta": 1e6,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
}
GROUP = 8
LR = 1e-6


def verdict(name: str, ok: bool, detail: str) -> bool:
    print(f"{'PASS' if ok else 'FAIL'}: {name} ({detail})", flush=True)
    return ok


def bf16_problem(device: torch.device) -> str | None:
    """Why this device cannot run bf16 compute, or None."""
    if device.type != "cuda":
        return None
    if not torch.cuda.is_bf16_supported():
        major, minor = torch.cuda.get_device_capability(device)
        return (
            f"{torch.cuda.get_device_name(device)} (compute capability {major}.{minor}) has no bf16: the "
            "trainer's update computes in bf16 (it needs compute capability 8.0 or newer, e.g. A100, H100)"
        )
    return None


def build(shape: dict[str, Any], device: torch.device, seed: int) -> tuple[Any, Any]:
    """A Qwen2 causal LM of ``shape`` with random weights in bf16 on ``device``, and proofrl's tiny tokenizer."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from proofrl.policy.tiny import sample_corpus, train_tokenizer

    tok = train_tokenizer(sample_corpus(), vocab_size=512, max_positions=shape["max_position_embeddings"])
    cfg = Qwen2Config(
        **{"vocab_size": len(tok), **shape},
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    g = torch.random.fork_rng(devices=[])
    with g:
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(cfg)
    return model.to(device=device, dtype=torch.bfloat16).eval(), tok


def groups_for(tok: Any, rows: int, tokens: int, seed: int) -> list[Any]:
    """``rows`` completions of ``tokens`` random token ids each, in groups of :data:`GROUP`, random 0/1 rewards
    (each group has both, so every row has an advantage)."""
    from proofrl.policy.generation import Completion
    from proofrl.policy.prompts import get_format
    from proofrl.problems import Problem
    from proofrl.rollout.proofs import Group, PromptItem

    fmt, g = get_format("coq"), torch.Generator().manual_seed(seed)
    out = []
    for gi in range(max(1, rows // GROUP)):
        prob = Problem(f"t{gi}", f"Theorem t{gi} (n : nat) : n + {gi} = {gi} + n.", "Require Import Arith.")
        text = fmt.prompt(prob, tok)
        comps = [
            Completion(
                "", tuple(int(t) for t in torch.randint(5, len(tok), (tokens,), generator=g)), (0.0,) * tokens, "length"
            )
            for _ in range(GROUP)
        ]
        rewards = [float(r) for r in torch.randint(0, 2, (GROUP,), generator=g)]
        rewards[0], rewards[1] = 1.0, 0.0
        out.append(Group(PromptItem(prob, text, 1, text), comps, [None] * GROUP, rewards=rewards))
    return out


def trainer_for(
    model: Any, tok: Any, out: Path, ref_device: str, micro: int, tokens: int, dtype: str, groups: list[Any]
) -> Any:
    from proofrl.train.config import load_recipe
    from proofrl.train.whole_proof import Trainer

    cfg = load_recipe(
        "demo",
        [
            f"model.dtype={dtype}",
            "model.gradient_checkpointing=true",
            f"model.ref_device={ref_device}",
            f"optim.micro_batch={micro}",
            f"rollout.max_tokens={tokens}",
            "ppo.epochs=1",
            "ppo.kl_coef=0.04",
            "ppo.skip_grad_norm=null",
            f"optim.lr={LR}",
            f"out={out}",
        ],
    )
    # no generator and no verifier: update() is called with the groups built here
    return Trainer(cfg, model, tok, None, None, [g.item.problem for g in groups])


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_text(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.max_memory_allocated(device) / 2**30:.2f} GiB allocated"
    return f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB process RSS (CPU)"


def timed_update(tr: Any, groups: list[Any], device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    sync(device)
    t0 = time.perf_counter()
    tr.update(groups)
    sync(device)
    return time.perf_counter() - t0


class GradRecorder(torch.optim.SGD):
    """lr 0: records the (clipped) gradient the update hands to its optimiser step, changes nothing."""

    def __init__(self, params: list[torch.nn.Parameter]):
        super().__init__(params, lr=0.0)
        self.grads: list[torch.Tensor] = []

    def step(self, closure: Any = None) -> Any:
        self.grads.append(
            torch.cat([p.grad.detach().float().flatten() for g in self.param_groups for p in g["params"]])
        )
        return super().step(closure)


def count_forwards(model: Any) -> Any:
    """A function giving how many forward passes ``model`` has made since this call (a hook on the model)."""
    n = [0]
    handle = model.register_forward_pre_hook(lambda *_: n.__setitem__(0, n[0] + 1))

    def calls() -> int:
        handle.remove()
        return n[0]

    return calls


def trl_comparison(
    model_src: Any, tok: Any, groups: list[Any], args: argparse.Namespace, device: torch.device, tmp: Path
) -> float | None:
    """Seconds per update of TRL's GRPO loss on the same batch (update_step.py's TRL side), or None."""
    try:
        import trl  # noqa: F401

        sys.path.insert(0, str(Path(__file__).parent))
        from update_step import trl_side
    except ImportError as e:
        print(f"TRL: not importable here ({e}); comparison skipped", flush=True)
        return None
    import copy

    from proofrl.policy.generation import encode_prompts

    prompts = encode_prompts(tok, [g.item.prompt for g in groups])
    b = {
        "prompts": [p for p, g in zip(prompts, groups, strict=True) for _ in g.completions],
        "responses": [list(c.token_ids) for g in groups for c in g.completions],
        "rewards": torch.tensor([r for g in groups for r in g.rewards]),
        "groups": torch.tensor([gi for gi, g in enumerate(groups) for _ in g.completions]),
    }
    ns = argparse.Namespace(
        micro=args.micro, group=GROUP, tokens=args.tokens, kl=0.04, dtype="bfloat16", rows=len(b["responses"])
    )
    policy, ref = copy.deepcopy(model_src).float(), copy.deepcopy(model_src)
    policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    step = trl_side(policy, ref, tok, b, ns, tmp / "trl")
    step()  # warm-up: AdamW's state
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    sync(device)
    t0 = time.perf_counter()
    step()
    sync(device)
    s = time.perf_counter() - t0
    print(
        f"TRL GRPO loss: {s:.2f} s per update, {b['rewards'].numel() * args.tokens / s:.0f} tokens/s, peak "
        f"{peak_text(device)}",
        flush=True,
    )
    del policy, ref
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_smoke(ap)  # CPU-sized: a tiny Qwen2, 8 rows x 16 tokens (the code path, not the numbers)
    ap.add_argument("--device", default=None, help="default: cuda (cpu with --smoke and no GPU)")
    ap.add_argument("--rows", type=int, default=None, help="rows per update (256; --smoke 8)")
    ap.add_argument("--tokens", type=int, default=None, help="tokens per completion (512; --smoke 16)")
    ap.add_argument("--micro", type=int, default=None, help="rows per forward/backward pass (16; --smoke 4)")
    ap.add_argument("--check-rows", type=int, default=None, help="rows of the accumulation check (32; --smoke 8)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    small = args.smoke
    args.rows = args.rows or (8 if small else 256)
    args.tokens = args.tokens or (16 if small else 512)
    args.micro = args.micro or (4 if small else 16)
    args.check_rows = args.check_rows or (8 if small else 32)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() or not small else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        print(
            "gpu_check: no CUDA device here (torch.cuda.is_available() is False); "
            "`python benchmarks/gpu_check.py --smoke` runs the CPU-sized check",
            file=sys.stderr,
        )
        return 2
    if (why := bf16_problem(device)) is not None:
        print(f"gpu_check: {why}", file=sys.stderr)
        return 2

    shape = TINY_QWEN2 if small else QWEN2_0_5B
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(
        f"device: {where}; torch {torch.__version__}; {args.rows} rows x {args.tokens} tokens, micro-batch "
        f"{args.micro}, bf16 compute over fp32 master weights, gradient checkpointing",
        flush=True,
    )
    model, tok = build(shape, device, args.seed)
    params = sum(p.numel() for p in model.parameters())
    print(f"model: Qwen2, {params / 1e6:.1f} M parameters (random weights), tokenizer of {len(tok)} tokens", flush=True)
    groups = groups_for(tok, args.rows, args.tokens, args.seed)
    rows = sum(len(g.completions) for g in groups)
    ok = True
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="proofrl-gpu-check-") as tmp:
        mismatch = ""
        for ref_device in ("same", "cpu"):
            tr = None
            try:
                m = build(shape, device, args.seed)[0]
                tr = trainer_for(
                    m, tok, Path(tmp) / ref_device, ref_device, args.micro, args.tokens, "bfloat16", groups
                )
                timed_update(tr, groups, device)  # warm-up: AdamW's state, kernels
                s = timed_update(tr, groups, device)
                seconds[ref_device] = s
                print(
                    f"reference {ref_device:>4}: {s:.2f} s per update, {rows * args.tokens / s:.0f} tokens/s, "
                    f"peak {peak_text(device)}",
                    flush=True,
                )
                if ref_device == "cpu" and next(tr.lm.ref_model.parameters()).device.type != "cpu":
                    mismatch = "the parked reference stayed on the GPU"
                off = [n for n, p in tr.model.named_parameters() if p.requires_grad and p.device != device]
                off += [
                    f"AdamW state of {i}"
                    for i, st in enumerate(tr.optimizer.state.values())
                    for v in st.values()
                    if torch.is_tensor(v) and v.dim() and v.device != device
                ]
                if off:
                    mismatch = f"not on {device}: {off[:3]}"
            except RuntimeError as e:
                if "device" not in str(e):
                    raise
                mismatch = f"reference {ref_device}: {' '.join(str(e).split())[:200]}"
            del tr
        ratio("ref_cpu_over_same_seconds", seconds.get("cpu", math.nan) / seconds.get("same", math.nan))
        trl_s = trl_comparison(model, tok, groups, args, device, Path(tmp))
        if trl_s is not None and "same" in seconds:
            ratio("trl_over_proofrl_seconds", trl_s / seconds["same"])
        ok &= verdict("no device mismatch", not mismatch, mismatch or f"both reference placements ran on {device}")

        # weights move at lr 1e-6: one AdamW step from fresh weights
        tr = trainer_for(
            build(shape, device, args.seed)[0],
            tok,
            Path(tmp) / "lr",
            "same",
            args.micro,
            args.tokens,
            "bfloat16",
            groups,
        )
        named = [(n, p) for n, p in tr.model.named_parameters() if p.requires_grad]
        before = [p.detach().float().clone() for _, p in named]
        ref_before = [p.detach().clone() for p in tr.lm.ref_model.parameters()]
        tr.update(groups)
        deltas = [(p.detach().float() - b).abs() for (_, p), b in zip(named, before, strict=True)]
        moved = sum(int((d > 0).sum()) for d in deltas) / sum(d.numel() for d in deltas)
        largest = max(float(d.max()) for d in deltas)
        finite = all(bool(torch.isfinite(p).all()) for _, p in named)
        ref_same = all(torch.equal(a, b) for a, b in zip(ref_before, tr.lm.ref_model.parameters(), strict=True))
        ok &= verdict(
            "weights move at lr 1e-6",
            finite and moved > 0.5 and 0 < largest <= 1e-5 and ref_same,
            f"{moved:.1%} of fp32 master weights changed, largest change {largest:.2e}, "
            f"reference {'unchanged' if ref_same else 'CHANGED'}",
        )
        del tr, before, deltas, ref_before

        # accumulation equals the full batch: the first groups' gradient in micro-batches and in one pass, each
        # from a trainer built with that ``micro_batch`` (the recipe key a run sets) on the same starting weights
        part = groups[: max(1, args.check_rows // GROUP)]
        n = sum(len(g.completions) for g in part)
        sizes = (min(args.micro, max(1, n // 2)), n)
        grads, passes, dtype = [], [], None
        for micro in sizes:
            tr = trainer_for(
                build(shape, device, args.seed)[0],
                tok,
                Path(tmp) / f"acc{micro}",
                "same",
                micro,
                args.tokens,
                "bfloat16",
                part,
            )
            tr.optimizer = GradRecorder([p for p in tr.model.parameters() if p.requires_grad])
            calls = count_forwards(tr.model)
            tr.update(part)
            grads.append(tr.optimizer.grads[-1])
            passes.append(calls())
            dtype = tr.lm.compute_dtype
            del tr
        err = float((grads[0] - grads[1]).norm() / grads[1].norm().clamp(min=1e-30))
        tol = 2e-2 if dtype == torch.bfloat16 else 1e-4
        split = passes[0] > passes[1]  # the micro-batched run really made more forward passes
        ok &= verdict(
            "accumulation equals the full batch",
            err <= tol and split and bool(grads[1].norm() > 0),
            f"{n} rows, micro-batches of {sizes[0]} vs one pass ({passes[0]} vs {passes[1]} forward passes): "
            f"relative L2 error {err:.2e} (tolerance {tol:g}, {dtype})",
        )
    print("all checks passed" if ok else "some checks FAILED", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
