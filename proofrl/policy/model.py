"""Load the policy: any Hugging Face causal LM and its tokenizer from a local directory, optionally with LoRA.

Never touches the hub (``local_files_only``). Defaults: bf16 on CUDA, fp32 on CPU. A directory written by
peft (``adapter_config.json``) loads its base model (which must also be local) with the adapter on top.
The tokenizer always has a pad token (the EOS token when it had none); padding side is left to the
callers, which pad explicitly (:mod:`.logprobs`, :mod:`.generation`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import torch
from pydantic import Field
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from ..schema import Config


class LoraConfig(Config):
    """LoRA (Hu et al., arXiv:2106.09685): ΔW = (α/r)·B·A on the named linear layers."""

    r: Annotated[int, Field(ge=1)] = 16
    """rank of A and B"""
    alpha: Annotated[int, Field(gt=0)] = 32
    """scale numerator α (peft's ``lora_alpha``)"""
    dropout: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.05
    """dropout on the LoRA input during training"""
    target_modules: Annotated[tuple[str, ...], Field(min_length=1)] = ("q_proj", "k_proj", "v_proj", "o_proj")
    """attention projections: the names are shared by Llama, Qwen and DeepSeek models"""


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_policy(
    path: str | Path,
    *,
    device: str | None = None,
    dtype: torch.dtype | None = None,
    lora: LoraConfig | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """``(model, tokenizer)`` from ``path``; with ``lora`` the model is a trainable peft model (base frozen)."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"no model directory at {path} (models are loaded from local paths only)")
    device = device or default_device()
    if dtype is None:
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    adapter = path / "adapter_config.json"
    base_path = Path(json.loads(adapter.read_text())["base_model_name_or_path"]) if adapter.exists() else path
    if not (base_path / "config.json").exists():
        raise FileNotFoundError(f"{base_path} has no config.json: not a Hugging Face model directory")

    tokenizer = AutoTokenizer.from_pretrained(
        path if (path / "tokenizer_config.json").exists() else base_path, local_files_only=True
    )
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token is None:
            raise ValueError(f"the tokenizer at {path} has neither a pad nor an EOS token")
        tokenizer.pad_token = tokenizer.eos_token
    # transformers types its wrapped ``to`` as taking the model itself: the ignore is for that annotation
    model = AutoModelForCausalLM.from_pretrained(base_path, local_files_only=True, dtype=dtype).to(device)  # type: ignore[arg-type]
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id

    if adapter.exists():
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, path, is_trainable=lora is not None)
    elif lora is not None:
        import peft

        cfg = peft.LoraConfig(
            r=lora.r,
            lora_alpha=lora.alpha,
            lora_dropout=lora.dropout,
            target_modules=list(lora.target_modules),
            task_type="CAUSAL_LM",
        )
        model = peft.get_peft_model(model, cfg)
    model.eval()  # callers switch to train() around their updates
    return model, tokenizer


def load_weights(model: torch.nn.Module, ckpt: Path) -> None:
    """Load a checkpoint written by ``save_pretrained`` into ``model`` in place (full weights or a LoRA adapter)."""
    if hasattr(model, "load_adapter") and (ckpt / "adapter_config.json").exists():
        from peft import set_peft_model_state_dict
        from peft.utils import load_peft_weights

        set_peft_model_state_dict(model, load_peft_weights(str(ckpt)))
        return
    from safetensors.torch import load_file

    files = sorted(ckpt.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{ckpt}: no *.safetensors weights")
    state: dict[str, torch.Tensor] = {}
    for f in files:
        state.update(load_file(str(f)))
    missing, unexpected = model.load_state_dict(state, strict=False)
    # Tied embeddings are saved once; anything else missing means a different architecture.
    missing = [k for k in missing if not k.endswith("lm_head.weight")]
    if missing or unexpected:
        raise ValueError(f"{ckpt}: weights do not fit the model (missing {missing[:3]}, unexpected {unexpected[:3]})")
