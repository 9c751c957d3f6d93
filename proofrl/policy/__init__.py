"""The policy: loading causal LMs (and a tiny one built here), log-probs of responses, sampling backends,
and the prompt formats of published provers. See docs/policy.md."""

from .generation import (
    Completion,
    GenerationError,
    Generator,
    HFGenerator,
    OpenAIGenerator,
    SamplingParams,
    VLLMGenerator,
    encode_prompts,
    make_generator,
)
from .logprobs import response_logprobs
from .model import LoraSpec, load_policy
from .prompts import FORMATS, PromptFormat, get_format
from .tiny import build_tiny_model

__all__ = [
    "Completion",
    "FORMATS",
    "GenerationError",
    "Generator",
    "HFGenerator",
    "LoraSpec",
    "OpenAIGenerator",
    "PromptFormat",
    "SamplingParams",
    "VLLMGenerator",
    "build_tiny_model",
    "encode_prompts",
    "get_format",
    "load_policy",
    "make_generator",
    "response_logprobs",
]
