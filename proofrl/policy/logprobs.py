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
from typing import Any

import torch
import torch.nn.functional as F


def _pad(
    rows: Sequence[Sequence[int]], pad_id: int, device: torch.device | str, *, left: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    width = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            cols = slice(width - len(r), width) if left else slice(0, len(r))
            ids[i, cols] = torch.tensor(list(r), dtype=torch.long)
            mask[i, cols] = 1
    return ids.to(device), mask.to(device)


def left_pad(
    rows: Sequence[Sequence[int]], pad_id: int, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, attention_mask)``, both (B, L), rows aligned to the right (prompts, for generation)."""
    return _pad(rows, pad_id, device, left=True)


def right_pad(
    rows: Sequence[Sequence[int]], pad_id: int, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, mask)``, both (B, T), rows aligned to the left (responses)."""
    return _pad(rows, pad_id, device, left=False)


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, L) -> (B, L): 0, 1, 2, … over the real tokens of each row; pads get 0 (they are masked anyway)."""
    return (attention_mask.cumsum(-1) - 1).clamp(min=0)


def _model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


CHUNK_BYTES = 1 << 28
"""fp32 bytes of logits handled at once by :func:`token_logprobs` (256 MiB: 441 positions of a 152k vocabulary)"""


def _chunk_rows(vocab: int, chunk_bytes: int) -> int:
    return max(1, chunk_bytes // (4 * max(vocab, 1)))


class _SelectedLogprobs(torch.autograd.Function):
    """log softmax(z / τ)[y] for N positions, chunked over positions, never holding an (N, V) fp32 tensor.

    Forward keeps only the per-position logsumexp (N floats) besides the logits it was given (which the graph
    holds anyway); backward recomputes softmax chunk by chunk: ∂/∂z_j = (1[j = y] − p_j) / τ, written into a
    gradient of the logits' own dtype.
    """

    @staticmethod
    def forward(
        ctx: Any, logits: torch.Tensor, targets: torch.Tensor, temperature: float, chunk: int, want_entropy: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        n = logits.shape[0]
        lse = torch.empty(n, dtype=torch.float32, device=logits.device)
        out = torch.empty(n, dtype=torch.float32, device=logits.device)
        ent = torch.empty(n if want_entropy else 0, dtype=torch.float32, device=logits.device)
        for s in range(0, n, chunk):
            z = logits[s : s + chunk].float()
            if temperature != 1.0:
                z = z / temperature
            lse_c = torch.logsumexp(z, dim=-1)
            lse[s : s + chunk] = lse_c
            out[s : s + chunk] = z.gather(-1, targets[s : s + chunk, None]).squeeze(-1) - lse_c
            if want_entropy:  # H = logsumexp(z) − Σ_j p_j z_j
                ent[s : s + chunk] = lse_c - (torch.softmax(z, dim=-1) * z).sum(-1)
        ctx.save_for_backward(logits, targets, lse)
        ctx.temperature, ctx.chunk = temperature, chunk
        ctx.mark_non_differentiable(ent)
        return out, ent

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor, _grad_ent: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        logits, targets, lse = ctx.saved_tensors
        t, chunk = ctx.temperature, ctx.chunk
        grad = torch.empty_like(logits)
        for s in range(0, logits.shape[0], chunk):
            z = logits[s : s + chunk].float()
            if t != 1.0:
                z = z / t
            g = grad_out[s : s + chunk, None].float()
            gz = torch.exp(z - lse[s : s + chunk, None]).mul_(-g)  # −g p
            gz.scatter_add_(-1, targets[s : s + chunk, None], g)  # + g 1[j = y]
            if t != 1.0:
                gz.div_(t)
            grad[s : s + chunk] = gz
        return grad, None, None, None, None


def token_logprobs(
    logits: torch.Tensor,
    targets: torch.Tensor,
    *,
    temperature: float = 1.0,
    entropy: bool = False,
    chunk_bytes: int = CHUNK_BYTES,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(log softmax(z / τ)[y], H(softmax(z / τ)) or None)``: ``logits (..., V)`` of any float dtype,
    ``targets (...)`` ``-> (...)`` float32 each.

    Computed in fp32 over chunks of positions (:data:`CHUNK_BYTES` of fp32 logits at a time), so neither the
    fp32 copy of the logits nor their log-softmax is ever materialised, in the forward or the backward pass.
    Gradients flow to ``logits`` for the log-probs only; the entropy is a detached diagnostic.
    """
    shape = targets.shape
    flat = logits.reshape(-1, logits.shape[-1])
    lp, ent = _SelectedLogprobs.apply(
        flat, targets.reshape(-1), float(temperature), _chunk_rows(logits.shape[-1], chunk_bytes), entropy
    )
    return lp.view(shape), (ent.view(shape) if entropy else None)


def _micro_batch_logprobs(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    pad_id: int,
    temperature: float,
    entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    device = _model_device(model)
    q_ids, q_mask = left_pad(prompts, pad_id, device)  # (b, P)
    o_ids, o_mask = right_pad(responses, pad_id, device)  # (b, T)
    T = o_ids.shape[1]
    if T == 0:
        empty = torch.zeros((len(prompts), 0), device=device)
        return empty, empty, (empty if entropy else None)
    input_ids = torch.cat([q_ids, o_ids], dim=1)  # (b, P+T)
    attention_mask = torch.cat([q_mask, o_mask], dim=1)  # (b, P+T)
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids(attention_mask),
        logits_to_keep=T + 1,  # columns P-1 … P+T-1; the last predicts past the response and is dropped
        use_cache=False,
    )
    # The logits stay (b, T+1, V) in the model's dtype, contiguous; the last column's target is a dummy pad
    # whose log-prob is cut off below (cheaper than copying a (b, T, V) slice).
    targets = torch.cat([o_ids, o_ids.new_full((len(prompts), 1), pad_id)], dim=1)  # (b, T+1)
    lp, ent = token_logprobs(out.logits, targets, temperature=temperature, entropy=entropy)
    mask = o_mask.to(torch.float32)
    return lp[:, :T] * mask, mask, (ent[:, :T] * mask if ent is not None else None)


def response_logprobs(
    model: torch.nn.Module,
    prompt_ids: Sequence[Sequence[int]],
    response_ids: Sequence[Sequence[int]],
    *,
    pad_id: int,
    micro_batch: int = 16,
    temperature: float = 1.0,
    entropy: bool = False,
) -> Any:
    """``(logps, mask)``, both (B, T) float32, T = the longest response; ``(logps, mask, entropy)`` with
    ``entropy=True``.

    ``logps[i, t] = log softmax(z / τ)[o_{i,t}]`` where z are the logits after ``q_i, o_{i,<t}``; padding has
    logp 0 and mask 0. τ = ``temperature`` (1 = the model's own distribution; pass the sampling temperature
    to score the tempered one, as verl does). ``entropy[i, t]`` = H(softmax(z / τ)) at that position, detached.
    Gradients flow to the model when ``torch.is_grad_enabled()``; the model's train/eval mode and any autocast
    are the caller's (dropout is on in train mode). Rows go through the model ``micro_batch`` at a time; the
    vocabulary-sized tensors are only ever the model's own logits (:func:`token_logprobs`).
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
    ents: list[torch.Tensor] = []
    for s in range(0, B, micro_batch):
        lp, m, e = _micro_batch_logprobs(
            model, prompt_ids[s : s + micro_batch], response_ids[s : s + micro_batch], pad_id, temperature, entropy
        )
        parts.append(F.pad(lp, (0, T - lp.shape[1])))  # (b, T)
        masks.append(F.pad(m, (0, T - m.shape[1])))
        if e is not None:
            ents.append(F.pad(e, (0, T - e.shape[1])))
    if not parts:
        empty = torch.zeros((0, 0), device=device)
        return (empty, empty, empty) if entropy else (empty, empty)
    if entropy:
        return torch.cat(parts), torch.cat(masks), torch.cat(ents)
    return torch.cat(parts), torch.cat(masks)
