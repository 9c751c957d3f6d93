"""The policy+value model: a value head on the final hidden layer, saved and loaded with the model, served as a
search value function (``model:DIR``), bins checked on load; the same LM is the tactic policy."""

from __future__ import annotations

import pytest
import torch

from proofrl.errors import ConfigError
from proofrl.policy.tactic import HFTacticPolicy, make_value_fn
from proofrl.policy.tiny import build_tiny_model
from proofrl.policy.value_head import HeadValue, cost_to_bin, load_policy_value

STATES = ["n : nat\n⊢ n + 0 = n", "a, b : nat\nH : a = b\n⊢ b = a", "⊢ forall x : nat, x * 1 = x"]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny-lm")
    return build_tiny_model(d, STATES * 4 + ["lia.", "intros.", "auto."], hidden=32, layers=1, heads=2, vocab_size=300)


def test_a_fresh_head_is_uniform_and_training_it_orders_states_by_cost(tiny_dir):
    torch.manual_seed(0)
    m = load_policy_value(tiny_dir, num_bins=8)
    assert m.num_bins == 8 and m.values(STATES[:2]) == pytest.approx([-3.5, -3.5])  # uniform over 0..7
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    m.train()
    for _ in range(40):
        loss = m.value_loss(STATES[:2], [0, 6])
        opt.zero_grad()
        loss.backward()
        opt.step()
    v = m.values(STATES[:2])
    assert v[0] > -1.0 and v[1] < -5.0  # −E[cost] follows the targets
    assert cost_to_bin(100, 8) == 7 and cost_to_bin(-1, 8) == 0


def test_save_load_round_trip_and_the_value_fn_from_dir(tiny_dir, tmp_path):
    m = load_policy_value(tiny_dir, num_bins=16, seed=1)
    torch.nn.init.normal_(m.head.weight, std=0.5)  # a head with an opinion
    before = m.values(STATES)
    m.save(tmp_path / "pv")
    back = load_policy_value(tmp_path / "pv")
    assert back.num_bins == 16 and back.values(STATES) == pytest.approx(before, abs=1e-5)
    fn = make_value_fn(f"model:{tmp_path / 'pv'}")
    assert isinstance(fn, HeadValue) and fn.value(STATES[1]) == pytest.approx(before[1], abs=1e-5)
    assert isinstance(back.tactic_policy(seed=0), HFTacticPolicy)
    assert back.tactic_policy(seed=0).model is back.lm  # one backbone for both heads


def test_bins_that_disagree_with_the_checkpoint_are_one_clear_error(tiny_dir, tmp_path):
    load_policy_value(tiny_dir, num_bins=16).save(tmp_path / "pv")
    with pytest.raises(ConfigError, match=r"value head has 16 bins but 64 were asked for"):
        load_policy_value(tmp_path / "pv", num_bins=64)
    with pytest.raises(ConfigError, match=r"no value_head\.json"):
        make_value_fn(f"model:{tiny_dir}")  # a plain LM has no head to serve
    load_policy_value(tiny_dir, num_bins=16).save(tmp_path / "lm-only", head=False)
    assert load_policy_value(tmp_path / "lm-only", num_bins=64).num_bins == 64  # no head saved: a fresh one
