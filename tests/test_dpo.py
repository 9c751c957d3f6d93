"""The one DPO loss against a hand-computed value, random pairing of valid and invalid tactics at one state, and
DPO steps on a real tiny model raising the chosen tactic's margin over the rejected one."""

from __future__ import annotations

import math
import random

import pytest
import torch

from proofrl.objectives.dpo import DPOStats, Pair, dpo_loss, dpo_update, online_pairs, random_pairs, sequence_logps


def test_dpo_loss_matches_a_hand_computed_value():
    # margins: (−1 − −2) − (−3 − −2) = 2 and (−2 − −1) − (−1 − −1) = −1; β = 0.5
    out = dpo_loss(
        torch.tensor([-1.0, -2.0]),
        torch.tensor([-3.0, -1.0]),
        torch.tensor([-2.0, -1.0]),
        torch.tensor([-2.0, -1.0]),
        beta=0.5,
    )
    want = (math.log1p(math.exp(-1.0)) + math.log1p(math.exp(0.5))) / 2  # −log σ(1), −log σ(−0.5)
    assert float(out.loss) == pytest.approx(want, abs=1e-6)  # 0.5806
    assert out.margin.tolist() == pytest.approx([2.0, -1.0])


def test_pairs_are_valid_against_invalid_at_the_same_state():
    rng = random.Random(0)
    assert random_pairs([0, 1], [], rng) == [] and random_pairs([], [2], rng) == []
    groups = online_pairs(
        prompt_ids=[[1, 2], [3]],
        responses=[[[5, 9], [6, 9], [5, 9], [7, 9]], [[8, 9], [8, 9]]],
        valid=[[True, False, True, False], [True, True]],
        rng=rng,
    )
    # state 1: one distinct valid sequence (drawn twice) → one pair against one of its two invalid ones;
    # state 2: nothing invalid → no pair
    assert len(groups) == 1
    p = groups[0]
    assert p.prompt == (1, 2) and p.chosen == (5, 9) and p.rejected in {(6, 9), (7, 9)}


def test_dpo_steps_on_a_tiny_model_raise_the_margin(tmp_path):
    from proofrl.policy.model import load_policy
    from proofrl.policy.tiny import build_tiny_model

    build_tiny_model(
        tmp_path,
        ["[GOAL]\n⊢ n + 0 = n\n[PROOFSTEP]\nlia. auto. exact I."] * 4,
        hidden=32,
        layers=1,
        heads=2,
        vocab_size=300,
    )
    model, tok = load_policy(tmp_path, device="cpu")
    ref, _ = load_policy(tmp_path, device="cpu")
    enc = lambda s: (*tok(s, add_special_tokens=False)["input_ids"], tok.eos_token_id)  # noqa: E731
    prompt = tuple(tok("[GOAL]\n⊢ n + 0 = n\n[PROOFSTEP]\n")["input_ids"])
    pair = Pair(prompt, enc("lia."), enc("exact I."))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    first = dpo_update(model, ref, [pair], opt, pad_id=pad, beta=0.1)
    assert isinstance(first, DPOStats) and first.pairs == 1
    assert first.loss == pytest.approx(math.log(2), abs=1e-4)  # π = π_ref at the start: margin 0
    for _ in range(5):
        last = dpo_update(model, ref, [pair], opt, pad_id=pad, beta=0.1)
    assert last.margin > 0 and last.loss < first.loss
    with torch.no_grad():
        lp = sequence_logps(model, [prompt, prompt], [pair.chosen, pair.rejected], pad_id=pad)
        lr = sequence_logps(ref, [prompt, prompt], [pair.chosen, pair.rejected], pad_id=pad)
    assert float((lp[0] - lr[0]) - (lp[1] - lr[1])) > 0
    assert dpo_update(model, ref, [], opt, pad_id=pad).pairs == 0
