"""How fast this machine samples from a tiny model now: the wall seconds of one fixed generation.

The tactic-level claims spend most of their time in the tiny model, not in Coq: in one reap search-and-learn
evaluation, its policy and value calls took about 330 of 380 search seconds and the tactics 36. A model step
is mostly Python and small-tensor overhead, so its speed depends on the machine and on the installed torch and
transformers as much as Coq's pace (:mod:`proofrl.provers.coq.pace`) depends on the machine. The job
(:func:`model_pace`): a freshly initialised Llama of the tiny model's default shape (seed 0, 2 layers, width 128),
8 rows sampling 64 new tokens each after a 32-token prompt (no early stop), on one torch thread, timed
:data:`REPEATS` times after a warm-up; the median is kept, with the libraries' versions and the torch build in
effect (:func:`torch_build`: the CPU kernels torch chose and its thread count) beside it, so two runs' paces can be
compared and a slow one explained.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from ..preflight import installed_version

REPEATS = 5
ROWS, PROMPT_TOKENS, NEW_TOKENS, VOCAB = 8, 32, 64, 1024


def library_versions() -> dict[str, str]:
    """The installed versions of what a model step runs on (``"-"`` for one that is not installed)."""
    return {name: installed_version(name) for name in ("torch", "transformers", "tokenizers")}


def torch_build() -> dict[str, Any]:
    """The torch build, the CPU kernels it chose (``ATEN_CPU_CAPABILITY`` can lower them) and the torch threads in
    effect: another of any runs a model step at another speed, and can round its floats differently."""
    import torch

    return {
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
    }


def model_pace() -> dict[str, Any]:
    """``{"model_pace_s": median wall seconds of the fixed generation, "versions": library_versions(),
    "torch_build": torch_build()}`` (the build as the caller runs it, before the job's one thread). The torch
    thread count and the global RNG are left as they were."""
    import torch
    from transformers import GenerationConfig, LlamaForCausalLM

    from .tiny import tiny_config

    config = tiny_config(VOCAB)
    build = torch_build()
    threads = build["threads"]  # restored after the job's one thread
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = LlamaForCausalLM(config).eval()
            prompt = torch.randint(5, VOCAB, (ROWS, PROMPT_TOKENS))  # past the special tokens
            settings = GenerationConfig(
                do_sample=True,
                max_new_tokens=NEW_TOKENS,
                min_new_tokens=NEW_TOKENS,  # every row runs the whole length: the same work on every machine
                top_k=0,
                pad_token_id=config.pad_token_id,
                eos_token_id=config.eos_token_id,
            )
            walls = []
            with torch.no_grad():
                for i in range(REPEATS + 1):
                    t0 = time.perf_counter()
                    model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), generation_config=settings)
                    if i:  # the first call warms caches and lazy imports up
                        walls.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    return {"model_pace_s": round(statistics.median(walls), 3), "versions": library_versions(), "torch_build": build}
