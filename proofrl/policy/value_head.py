"""The policy+value model of search-and-learn (reap's reaper, AlphaProof): one causal LM backbone, its language
model head proposing tactics, and a categorical value head branching from the final hidden layer.

* **Bins.** The value head predicts a distribution over the remaining proof cost c ∈ {0, 1, …, B−1} tactic
  steps (B = ``num_bins``, 64 as the AlphaProof pseudocode's ``num_value_bins``); the last bin means "B−1 or
  more, or not found". The value served to search is v(s) = −E[c] = −Σ_i p_i · i, reap's convention (about
  −(steps to go), 0 for a solved state).
* **Input.** The head reads the hidden state of the last token of :func:`~proofrl.policy.tactic.tactic_prompt`
  (the policy's own prompt, as reap sends its value service the policy's prompt), so the same forward pass
  prefix serves both heads.
* **Files.** A model directory holds the LM as ``save_pretrained`` writes it (full weights or a LoRA adapter),
  the tokenizer, ``value_head.json`` (``{"num_bins", "hidden_size"}``) and ``value_head.safetensors``.
  Loading a directory whose head has other bins than asked for is one :class:`~proofrl.errors.ConfigError` line.
* **Serving.** :class:`HeadValue` is a :class:`~proofrl.policy.tactic.ValueFn` (``proofrl search --value
  model:DIR`` through :func:`value_fn_from_dir`); :meth:`PolicyValueModel.tactic_policy` is an
  :class:`~proofrl.policy.tactic.HFTacticPolicy` on the same LM.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..errors import ConfigError
from .model import LoraConfig, load_policy
from .tactic import HFTacticPolicy, tactic_prompt

NUM_BINS = 64
"""AlphaProof pseudocode ``num_value_bins``"""
HEAD_CONFIG, HEAD_WEIGHTS = "value_head.json", "value_head.safetensors"


def cost_to_bin(cost: float, num_bins: int) -> int:
    """Steps to go → its bin: rounded, clipped to [0, B−1] (the last bin holds everything farther)."""
    return int(min(max(round(cost), 0), num_bins - 1))


class PolicyValueModel(nn.Module):
    """``lm`` (a Hugging Face causal LM, maybe a peft model) + ``head`` = Linear(hidden, num_bins)."""

    def __init__(self, lm: Any, tokenizer: Any, num_bins: int = NUM_BINS, *, seed: int = 0):
        super().__init__()
        if num_bins < 2:
            raise ConfigError(f"value head: num_bins must be >= 2, got {num_bins}")
        self.lm, self.tokenizer, self.num_bins = lm, tokenizer, num_bins
        hidden = int(lm.config.hidden_size)
        with torch.random.fork_rng(devices=[]):  # the head's initialisation does not move the caller's RNG
            torch.manual_seed(seed)
            self.head = nn.Linear(hidden, num_bins)
            nn.init.zeros_(self.head.weight)  # starts uniform over bins: no opinion until taught
            nn.init.zeros_(self.head.bias)
        self.head.to(next(lm.parameters()).device)

    @property
    def device(self) -> torch.device:
        return next(self.lm.parameters()).device

    def _prompt_ids(self, state_texts: Sequence[str]) -> list[list[int]]:
        from .generation import encode_prompts

        limit = getattr(self.lm.config, "max_position_embeddings", None) or 10**9
        return [ids[-limit:] for ids in encode_prompts(self.tokenizer, [tactic_prompt(s) for s in state_texts])]

    def value_logits(self, state_texts: Sequence[str]) -> torch.Tensor:
        """(B, num_bins) logits of the cost bins, from the final hidden layer at each prompt's last token.
        Gradients flow when enabled (the learner); the caller picks train/eval mode."""
        ids = self._prompt_ids(state_texts)
        width = max(len(r) for r in ids)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.tensor([r + [pad] * (width - len(r)) for r in ids], device=self.device)
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in ids], device=self.device)
        out = self.lm(input_ids=input_ids, attention_mask=mask, output_hidden_states=True, logits_to_keep=1)
        last = out.hidden_states[-1]  # right padding: the last real token is at len-1
        idx = torch.tensor([len(r) - 1 for r in ids], device=self.device)
        h = last[torch.arange(len(ids), device=self.device), idx]
        return self.head(h.to(self.head.weight.dtype))

    @torch.no_grad()
    def values(self, state_texts: Sequence[str], batch: int = 32) -> list[float]:
        """v(s) = −Σ_i softmax(logits)_i · i for each state (reap's −(steps to go))."""
        was = self.training
        self.eval()
        try:
            bins = torch.arange(self.num_bins, dtype=torch.float32, device=self.device)
            out: list[float] = []
            for i in range(0, len(state_texts), batch):
                p = torch.softmax(self.value_logits(state_texts[i : i + batch]).float(), dim=-1)
                out += (-(p * bins).sum(-1)).tolist()
            return out
        finally:
            self.train(was)

    def value_loss(self, state_texts: Sequence[str], costs: Sequence[float]) -> torch.Tensor:
        """Cross-entropy of the bin distribution against each state's cost bin (mean over states)."""
        target = torch.tensor([cost_to_bin(c, self.num_bins) for c in costs], device=self.device)
        return nn.functional.cross_entropy(self.value_logits(state_texts).float(), target)

    def tactic_policy(self, **kw: Any) -> HFTacticPolicy:
        """The LM head as the search's tactic policy (sampling settings in ``kw``)."""
        return HFTacticPolicy(self.lm, self.tokenizer, **kw)

    def save(self, out_dir: str | Path, *, head: bool = True) -> Path:
        """LM (or adapter) + tokenizer + (``head``) the value head and its bin settings, into ``out_dir``."""
        from safetensors.torch import save_file

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.lm.save_pretrained(out)
        self.tokenizer.save_pretrained(out)
        if not head:
            return out
        save_file(
            {k: v.detach().cpu().contiguous() for k, v in self.head.state_dict().items()}, str(out / HEAD_WEIGHTS)
        )
        (out / HEAD_CONFIG).write_text(json.dumps({"num_bins": self.num_bins, "hidden_size": self.head.in_features}))
        return out


def head_settings(path: str | Path) -> dict[str, Any] | None:
    """The ``value_head.json`` of a model directory, or None when it has no value head."""
    f = Path(path) / HEAD_CONFIG
    return json.loads(f.read_text()) if f.is_file() else None


def load_policy_value(
    path: str | Path,
    *,
    num_bins: int | None = None,
    device: str | None = None,
    lora: LoraConfig | None = None,
    seed: int = 0,
) -> PolicyValueModel:
    """The model in ``path`` (a local HF directory, LoRA adapters included) with its value head; a directory
    without a head gets a fresh one of ``num_bins`` (default 64). A head whose bins disagree with
    ``num_bins`` is a :class:`ConfigError`."""
    path = Path(path)
    if not path.is_dir():
        raise ConfigError(f"no model directory at {path}")
    saved = head_settings(path)
    if saved is not None and num_bins is not None and int(saved["num_bins"]) != num_bins:
        raise ConfigError(
            f"{path}: its value head has {saved['num_bins']} bins but {num_bins} were asked for; "
            f"set the bins to {saved['num_bins']} or start from a model without a value head"
        )
    lm, tok = load_policy(path, device=device or "cpu", lora=lora)
    model = PolicyValueModel(lm, tok, int(saved["num_bins"]) if saved else (num_bins or NUM_BINS), seed=seed)
    if saved is not None:
        from safetensors.torch import load_file

        if int(saved["hidden_size"]) != model.head.in_features:
            raise ConfigError(
                f"{path}: its value head reads hidden size {saved['hidden_size']} but the model's "
                f"is {model.head.in_features}"
            )
        model.head.load_state_dict(load_file(str(path / HEAD_WEIGHTS), device=str(model.device)))
    return model


class HeadValue:
    """A :class:`~proofrl.policy.tactic.ValueFn` over a :class:`PolicyValueModel`'s value head."""

    name = "model"

    def __init__(self, model: PolicyValueModel):
        self.model = model

    def value(self, state_text: str) -> float:
        return self.model.values([state_text])[0]


def value_fn_from_dir(path: str, **kw: Any) -> HeadValue:
    """``make_value_fn("model:DIR")``: the value head saved in ``DIR`` (``device``, ``num_bins`` in ``kw``).
    A directory without a value head is an error here (an untaught head has no opinion to serve)."""
    if head_settings(path) is None:
        raise ConfigError(f"model:{path}: no {HEAD_CONFIG} there; train one with proofrl train --recipe reap")
    return HeadValue(load_policy_value(path, num_bins=kw.get("num_bins"), device=kw.get("device")))
