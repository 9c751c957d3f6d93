"""Tokens per second of the generation backends on the tiny model (CPU here), side by side.

    python benchmarks/generation_speed.py --prompts 16 --n 4 --max-tokens 64 --batch-sizes 8,64 --threads 1
    python benchmarks/generation_speed.py --smoke    # 2 prompts x 2 samples of 8 tokens, one repeat: seconds

Backends measured: ``hf`` (transformers ``generate`` with the log-prob recorder) with and without a stop
string (the per-step tail decode of the stop criterion), and ``openai`` — the same HF sampler behind an
OpenAI-style ``/v1/completions`` server on loopback, so the difference is the HTTP layer. ``--openai-url``
measures an external server instead. The tiny model is untrained, so completions run to ``--max-tokens``.
On a machine shared with prover processes, ``--threads 1`` is the one to compare: two intra-op threads
competing with other busy processes ran 10-15x slower than one in our runs.
Each configuration is warmed once with the same shapes, then timed over ``--repeats`` calls (median and
best reported: the machine is shared); tokens are those returned. The ``ratio:`` lines compare median tokens/s
at the largest batch size: with a stop string / without, and the OpenAI-style server / HF in process.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path

import torch
from _bench import add_smoke, ratio

from proofrl.policy import HFGenerator, OpenAIGenerator, SamplingParams, build_tiny_model, get_format, load_policy
from proofrl.policy.tiny import sample_corpus
from proofrl.problems import Problem


def prompts(count: int) -> list[str]:
    fmt = get_format("coq")
    base = [
        Problem(f"t{i}", f"Theorem t{i} : forall n : nat, n + {i} = {i} + n.", "Require Import Arith Lia.\n")
        for i in range(count)
    ]
    return [fmt.prompt(p) for p in base]


def timed(gen, texts: list[str], params: SamplingParams, repeats: int) -> tuple[int, float, float]:
    """(tokens per call, median tokens/s, best tokens/s) over ``repeats`` timed calls after a warm one."""
    gen.generate(texts, SamplingParams(**{**params.__dict__, "seed": 10_000}))  # warm, same shapes
    rates, tokens = [], 0
    for r in range(repeats):
        t0 = time.perf_counter()
        groups = gen.generate(texts, SamplingParams(**{**params.__dict__, "seed": r}))
        tokens = sum(len(c.token_ids) or len(c.logprobs) for g in groups for c in g)
        rates.append(tokens / (time.perf_counter() - t0))
    return tokens, statistics.median(rates), max(rates)


def serve(model, tok) -> tuple[str, object]:
    """The HF sampler behind /v1/completions (vLLM's reply shape), on a free loopback port."""
    import uvicorn
    from fastapi import FastAPI

    app, gen = FastAPI(), HFGenerator(model, tok, batch_size=64)

    @app.post("/v1/completions")
    def completions(body: dict):
        p = SamplingParams(
            n=body["n"],
            temperature=body["temperature"],
            top_p=body["top_p"],
            max_tokens=body["max_tokens"],
            stop=tuple(body.get("stop") or ()),
            seed=body.get("seed"),
        )
        groups = gen.generate(body["prompt"], p)
        return {
            "choices": [
                {
                    "index": i * p.n + j,
                    "text": c.text,
                    "finish_reason": c.finish_reason,
                    "logprobs": {"tokens": [f"token_id:{t}" for t in c.token_ids], "token_logprobs": list(c.logprobs)},
                }
                for i, g in enumerate(groups)
                for j, c in enumerate(g)
            ]
        }

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--batch-sizes", default="8,64")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--openai-url", default="")
    ap.add_argument("--openai-model", default="tiny")
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    add_smoke(ap)
    args = ap.parse_args()
    if args.smoke:
        args.prompts, args.n, args.max_tokens, args.batch_sizes, args.repeats, args.threads = 2, 2, 8, "4", 1, 1
    if args.threads:
        torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        path = build_tiny_model(Path(tmp), sample_corpus())
        build_s = time.perf_counter() - t0
        model, tok = load_policy(path)
        texts = prompts(args.prompts)
        params = SamplingParams(n=args.n, max_tokens=args.max_tokens)
        print(
            f"tiny model built in {build_s:.2f}s; {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters; "
            f"torch threads {torch.get_num_threads()}; {args.prompts} prompts x n={args.n}, {args.max_tokens} tokens"
        )
        print(f"{'backend':<28}{'batch':>6}{'tokens/call':>12}{'median tok/s':>14}{'best tok/s':>12}")
        rows = []
        for bs in [int(b) for b in args.batch_sizes.split(",")]:
            gen = HFGenerator(model, tok, batch_size=bs)
            rows.append(("hf", bs, *timed(gen, texts, params, args.repeats)))
            stop = SamplingParams(**{**params.__dict__, "stop": ("```",)})
            rows.append(("hf + stop string", bs, *timed(gen, texts, stop, args.repeats)))
        if args.openai_url:
            url, server = args.openai_url, None
        else:
            url, server = serve(model, tok)
        client = OpenAIGenerator(url, args.openai_model, batch_size=args.prompts)
        rows.append(
            (
                f"openai ({'external' if server is None else 'loopback, hf'})",
                64,
                *timed(client, texts, params, args.repeats),
            )
        )
        if server is not None:
            server.should_exit = True
        for name, bs, tokens, median, best in rows:
            print(f"{name:<28}{bs:>6}{tokens:>12}{median:>14.0f}{best:>12.0f}")
        hf, stop, openai = rows[-3][3], rows[-2][3], rows[-1][3]  # the largest batch size, and the server
        ratio("hf with/without a stop string, tokens/s", stop / hf)
        ratio("openai server/hf in process, tokens/s", openai / hf)


if __name__ == "__main__":
    main()
