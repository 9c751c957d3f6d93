"""The policy: loading causal LMs (and a tiny one built here), log-probs of responses, sampling backends,
the prompt formats of published provers and kimina's second turn. See docs/policy.md.

The names below are imported on first use, so that ``proofrl.policy.prompts`` (read when a recipe is checked)
does not pull in transformers."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "Completion": "generation",
    "GenerationError": "generation",
    "Generator": "generation",
    "HFGenerator": "generation",
    "OpenAIGenerator": "generation",
    "SamplingConfig": "generation",
    "VLLMGenerator": "generation",
    "encode_prompts": "generation",
    "make_generator": "generation",
    "response_logprobs": "logprobs",
    "LoraConfig": "model",
    "load_policy": "model",
    "FORMATS": "prompts",
    "PromptFormat": "prompts",
    "get_format": "prompts",
    "build_tiny_model": "tiny",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
