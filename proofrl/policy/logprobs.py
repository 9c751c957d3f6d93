"""Per-token log-probabilities of responses under the policy: log π_θ(o_t | q, o_<t), the quantity every
policy-gradient loss and the unlikeliness rank are built from.

Rows are laid out as ``[pad … pad, prompt, response, pad … pad]``: prompts are left-padded so that every
response starts in the same column P, responses right-padded to the longest T. Then the logits that predict
the responses are the contiguous columns P-1 … P+T-2, and ``logits_to_keep`` spares the prompt's logits
(B·P·V floats — the bulk of the memory for long prompts and 150k-token vocabularies). Position ids count
real tokens only, so a left-padded row sees the same positions as the row alone (RoPE models such as
Llama would tolerate a uniform shift anyway; models with absolute positions would not).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F


def left_pad(rows: Sequence[Sequence[int]], pad_id: int, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, attention_mask)``, both (B, L), rows aligned to the right."""
    width = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, width - len(r):] = torch.tensor(list(r), dtype=torch.long)
            mask[i, width - len(r):] = 1
    return ids.to(device), mask.to(device)


def right_pad(rows: Sequence[Sequence[int]], pad_id: int, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, mask)``, both (B, T), rows aligned to the left."""
    width = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, : len(r)] = torch.tensor(list(r), dtype=torch.long)
            mask[i, : len(r)] = 1
    return ids.to(device), mask.to(device)


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, L) -> (B, L): 0, 1, 2, … over the real tokens of each row; pads get 0 (they are masked anyway)."""
    return (attention_mask.cumsum(-1) - 1).clamp(min=0)


def _model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def _micro_batch_logprobs(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    pad_id: int,
    temperature: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    device = _model_device(model)
    q_ids, q_mask = left_pad(prompts, pad_id, device)  # (b, P)
    o_ids, o_mask = right_pad(responses, pad_id, device)  # (b, T)
    T = o_ids.shape[1]
    if T == 0:
        empty = torch.zeros((len(prompts), 0), device=device)
        return empty, empty
    input_ids = torch.cat([q_ids, o_ids], dim=1)  # (b, P+T)
    attention_mask = torch.cat([q_mask, o_mask], dim=1)  # (b, P+T)
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids(attention_mask),
        logits_to_keep=T + 1,  # columns P-1 … P+T-1; the last predicts past the response and is dropped
        use_cache=False,
    )
    logits = out.logits[:, :-1].float()  # (b, T, V)
    if temperature != 1.0:
        logits = logits / temperature
    logps = torch.log_softmax(logits, dim=-1).gather(-1, o_ids.unsqueeze(-1)).squeeze(-1)  # (b, T)
    mask = o_mask.to(logps.dtype)
    return logps * mask, mask


def response_logprobs(
    model: torch.nn.Module,
    prompt_ids: Sequence[Sequence[int]],
    response_ids: Sequence[Sequence[int]],
    *,
    pad_id: int,
    micro_batch: int = 16,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(logps, mask)``, both (B, T) float32, T = the longest response.

    ``logps[i, t] = log softmax(z / τ)[o_{i,t}]`` where z are the logits after ``q_i, o_{i,<t}``; padding has
    logp 0 and mask 0. τ = ``temperature`` (1 = the model's own distribution; pass the sampling temperature
    to score the tempered one, as verl does). Gradients flow to the model when ``torch.is_grad_enabled()``;
    the model's train/eval mode is the caller's (dropout is on in train mode).
    """
    if len(prompt_ids) != len(response_ids):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(response_ids)} responses")
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError("every prompt needs at least one token (a BOS will do) to predict the first response token")
    if micro_batch < 1 or temperature <= 0:
        raise ValueError(f"micro_batch must be >= 1 and temperature > 0, got {micro_batch}, {temperature}")
    B, T = len(prompt_ids), max((len(r) for r in response_ids), default=0)
    device = _model_device(model)
    parts: list[torch.Tensor] = []
    masks: list[torch.Tensor] = []
    for s in range(0, B, micro_batch):
        lp, m = _micro_batch_logprobs(model, prompt_ids[s : s + micro_batch], response_ids[s : s + micro_batch], pad_id, temperature)
        parts.append(F.pad(lp, (0, T - lp.shape[1])))  # (b, T)
        masks.append(F.pad(m, (0, T - m.shape[1])))
    if not parts:
        return torch.zeros((0, 0), device=device), torch.zeros((0, 0), device=device)
    return torch.cat(parts), torch.cat(masks)
