"""GRPO maths against values worked out by hand."""

import math

import pytest
import torch

from proofrl.train.grpo import (
    ADV_ESTIMATORS,
    AGG_MODES,
    KL_ESTIMATORS,
    GroupBuffer,
    PPOConfig,
    Registry,
    RolloutBatch,
    agg_loss,
    group_advantages,
    group_advantages_loop,
    informative_groups,
    kl_penalty,
    ppo_clip_loss,
    ppo_update,
)

S3 = math.sqrt(1 / 3)  # unbiased std of both hand groups below


def test_advantages_two_interleaved_groups_by_hand():
    # group 7: [1, 0, 0, 1] -> mean 1/2, std sqrt(1/3); group 3: [1, 0, 0] -> mean 1/3, std sqrt(1/3)
    rewards = torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    groups = torch.tensor([7, 3, 7, 3, 7, 3, 7])
    adv = group_advantages(rewards, groups)
    expected = torch.tensor([0.5 / S3, (2 / 3) / S3, -0.5 / S3, -(1 / 3) / S3, -0.5 / S3, -(1 / 3) / S3, 0.5 / S3])
    assert torch.allclose(adv, expected, atol=1e-5)
    assert torch.allclose(adv, ADV_ESTIMATORS.get("grpo")(rewards, groups), atol=0)


def test_dr_grpo_advantages_are_mean_centred_only():
    rewards = torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    groups = torch.tensor([7, 3, 7, 3, 7, 3, 7])
    adv = ADV_ESTIMATORS.get("dr_grpo")(rewards, groups)
    assert torch.allclose(adv, torch.tensor([0.5, 2 / 3, -0.5, -1 / 3, -0.5, -1 / 3, 0.5]), atol=1e-6)


def test_single_member_group_gets_zero_and_constant_group_gets_zero():
    rewards = torch.tensor([5.0, 1.0, 1.0, 0.3])
    groups = torch.tensor([0, 1, 1, 2])
    for scale in (True, False):
        assert group_advantages(rewards, groups, scale_by_std=scale).tolist() == [0.0, 0.0, 0.0, 0.0]


def test_vectorised_advantages_match_loop_reference():
    g = torch.Generator().manual_seed(0)
    rewards = torch.randint(0, 2, (300,), generator=g).float() * torch.rand(300, generator=g)
    groups = torch.randint(0, 40, (300,), generator=g)
    for scale in (True, False):
        a = group_advantages(rewards, groups, scale_by_std=scale)
        b = group_advantages_loop(rewards, groups, scale_by_std=scale)
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)


def test_registry_lists_choices_and_refuses_double_registration():
    with pytest.raises(ValueError, match=r"valid choices: \['dr_grpo', 'grpo'\]"):
        ADV_ESTIMATORS.get("ppo")
    with pytest.raises(ValueError, match="token-mean"):
        agg_loss(torch.ones(1, 1), torch.ones(1, 1), "mean")
    reg: Registry = Registry("thing")
    reg.register("a")(lambda: 1)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("a")(lambda: 2)
    with pytest.raises(ValueError, match="already registered"):
        KL_ESTIMATORS.register("k3")(lambda a, b: a)


def test_kl_estimators_by_hand():
    logp, ref = torch.tensor([[math.log(0.5)]]), torch.tensor([[math.log(0.25)]])
    assert kl_penalty(logp, ref, "k1").item() == pytest.approx(math.log(2))
    assert kl_penalty(logp, ref, "k2").item() == pytest.approx(0.5 * math.log(2) ** 2)
    # k3: r = pi_ref/pi = 1/2 -> r - log r - 1 = 0.5 + log 2 - 1
    assert kl_penalty(logp, ref, "k3").item() == pytest.approx(0.5 + math.log(2) - 1)
    assert kl_penalty(logp, ref, "low_var_kl").item() == kl_penalty(logp, ref, "k3").item()
    assert kl_penalty(ref, ref, "k3").item() == 0.0


def test_low_var_kl_clamps_like_verl():
    # log(pi_ref/pi) = +30 -> clamped to 20 -> e^20 - 21 -> clamped to 10
    assert kl_penalty(torch.tensor([[-30.0]]), torch.tensor([[0.0]]), "low_var_kl").item() == 10.0
    # log(pi_ref/pi) = -30 -> clamped to -20 -> e^-20 + 19 -> clamped to 10
    assert kl_penalty(torch.tensor([[0.0]]), torch.tensor([[-30.0]]), "low_var_kl").item() == 10.0


LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
MASK = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]])  # row 2 is padding only; 5, 6 are padding too


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("token-mean", (1 + 2 + 3 + 4) / 4),
        ("seq-mean-token-mean", (2.0 + 4.0) / 2),  # per-row means 2 and 4; the empty row does not count
        ("seq-mean-token-sum", (6.0 + 4.0) / 2),
        ("seq-mean-token-sum-norm", (6.0 + 4.0) / 3),  # divided by T = 3, not by the number of rows
    ],
)
def test_agg_modes_by_hand(mode, expected):
    assert agg_loss(LOSS, MASK, mode).item() == pytest.approx(expected)


def test_seq_mean_token_sum_norm_uses_constant_horizon():
    assert agg_loss(LOSS, MASK, "seq-mean-token-sum-norm", horizon=5).item() == pytest.approx(10 / 5)


def test_agg_keeps_leading_dimensions_independent():
    stacked = torch.stack([LOSS, 2 * LOSS])
    out = agg_loss(stacked, torch.stack([MASK, MASK]), "token-mean")
    assert out.tolist() == pytest.approx([2.5, 5.0])
    assert set(AGG_MODES.names()) == {"token-mean", "seq-mean-token-mean", "seq-mean-token-sum",
                                      "seq-mean-token-sum-norm"}


def _clip_case(ratio: float, adv: float, low=0.2, high=0.3):
    logp = torch.tensor([[math.log(ratio)]], requires_grad=True)
    out = ppo_clip_loss(logp, torch.zeros(1, 1), torch.tensor([adv]), torch.ones(1, 1),
                        clip_ratio_low=low, clip_ratio_high=high)
    out.loss.backward()
    return out.loss.item(), logp.grad.item(), out.clipfrac


def test_clip_upper_bound_positive_advantage():
    loss, grad, frac = _clip_case(1.5, +1.0)  # clipped at 1 + 0.3
    assert loss == pytest.approx(-1.3) and grad == 0.0 and frac == 1.0
    loss, grad, frac = _clip_case(1.25, +1.0)  # inside the asymmetric upper bound (0.25 < 0.3)
    assert loss == pytest.approx(-1.25) and grad == pytest.approx(-1.25) and frac == 0.0


def test_clip_lower_bound_negative_advantage():
    loss, grad, frac = _clip_case(0.5, -1.0)  # clipped at 1 - 0.2
    assert loss == pytest.approx(0.8) and grad == 0.0 and frac == 1.0
    loss, grad, frac = _clip_case(0.75, -1.0, low=0.3)
    assert loss == pytest.approx(0.75) and grad == pytest.approx(0.75) and frac == 0.0


def test_no_clip_where_the_objective_gets_worse():
    # A < 0 with rho > 1 + eps (and A > 0 with rho < 1 - eps) stay unclipped: the min keeps the pessimistic term
    loss, grad, _ = _clip_case(2.0, -1.0)
    assert loss == pytest.approx(2.0) and grad == pytest.approx(2.0)
    loss, grad, _ = _clip_case(0.5, +1.0)
    assert loss == pytest.approx(-0.5) and grad == pytest.approx(-0.5)


def test_kl_term_is_added_with_its_coefficient():
    logp = torch.tensor([[math.log(0.5)]])
    out = ppo_clip_loss(logp, logp, torch.tensor([0.0]), torch.ones(1, 1), ref_logp=torch.tensor([[math.log(0.25)]]),
                        kl_coef=0.1, kl_kind="k1")
    assert out.loss.item() == pytest.approx(0.1 * math.log(2))
    assert out.kl == pytest.approx(math.log(2))


def _tabular(theta):
    def logp_fn(rows, actions=torch.tensor([0, 1])):
        return torch.log_softmax(theta, -1)[actions[rows]].unsqueeze(-1)  # (b, 1)

    return logp_fn


def test_one_epoch_is_the_policy_gradient_by_hand():
    # pi uniform over 3 actions; samples a=0 (A=+1), a=1 (A=-1); token-mean loss -(rho0 - rho1)/2.
    # d/dtheta = -1/2 [(e0 - pi) - (e1 - pi)] = [-1/2, 1/2, 0]; SGD lr 1 -> theta = [1/2, -1/2, 0].
    theta = torch.zeros(3, requires_grad=True)
    fn = _tabular(theta)
    with torch.no_grad():
        old = fn(torch.arange(2))
    batch = RolloutBatch(old, torch.tensor([1.0, -1.0]), torch.ones(2, 1))
    stats = ppo_update(fn, batch, torch.optim.SGD([theta], lr=1.0), PPOConfig(epochs=1))
    assert theta.tolist() == pytest.approx([0.5, -0.5, 0.0])
    assert stats.steps == 1 and stats.skipped == 0 and stats.clipfrac == 0.0


def test_epochs_and_minibatches_count_steps_and_skip_rule_holds_params():
    theta = torch.zeros(3, requires_grad=True)
    fn = _tabular(theta)
    with torch.no_grad():
        old = fn(torch.arange(2))
    batch = RolloutBatch(old, torch.tensor([1.0, -1.0]), torch.ones(2, 1))
    opt = torch.optim.SGD([theta], lr=1.0)
    stats = ppo_update(fn, batch, opt, PPOConfig(epochs=3, minibatch_rows=1), generator=torch.Generator().manual_seed(0))
    assert stats.steps == 6
    theta2 = torch.zeros(3, requires_grad=True)
    stats = ppo_update(_tabular(theta2), batch, torch.optim.SGD([theta2], lr=1.0), PPOConfig(epochs=2, skip_grad_norm=0.5))
    assert stats.skipped == 2 and theta2.tolist() == [0.0, 0.0, 0.0]  # |grad| = 1/sqrt(2) >= 0.5


def test_second_epoch_moves_ratio_and_clips():
    theta = torch.zeros(3, requires_grad=True)
    fn = _tabular(theta)
    with torch.no_grad():
        old = fn(torch.arange(2))
    batch = RolloutBatch(old, torch.tensor([1.0, -1.0]), torch.ones(2, 1))
    stats = ppo_update(fn, batch, torch.optim.SGD([theta], lr=5.0), PPOConfig(epochs=2))
    assert stats.clipfrac > 0 and stats.approx_kl > 0


def test_informative_groups_rule():
    r = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 1.0], [0.5, 0.5, 0.4]])
    assert informative_groups(r).tolist() == [False, False, True, True]


def test_buffer_drops_uniform_groups_and_triggers_at_target():
    buf: GroupBuffer[str] = GroupBuffer(target_samples=4)
    assert buf.add([1, 1, 1], "all-correct") is False
    assert buf.add([0, 0], "all-wrong") is False
    assert buf.add([1, 0], "a") is True and not buf.ready
    assert buf.add(torch.tensor([0.0, 1.0, 1.0]), "b") is True and buf.ready
    assert buf.num_samples == 5 and (buf.kept_groups, buf.dropped_groups) == (2, 2)
    assert buf.take() == ["a", "b"]
    assert len(buf) == 0 and not buf.ready and buf.num_samples == 0


def test_buffer_rule_must_see_raw_rewards():
    # An all-correct group is uninformative, but after the unlikeliness shaping its rewards differ.
    from proofrl.rewards.unlikeliness import unlikeliness_reward

    raw = torch.ones(4)
    shaped = unlikeliness_reward(raw.unsqueeze(0), torch.tensor([[-1.0, -2.0, -3.0, -4.0]]))[0]
    buf: GroupBuffer[int] = GroupBuffer(8)
    assert buf.add(raw, 0) is False
    assert bool(informative_groups(shaped.unsqueeze(0))[0]) is True
