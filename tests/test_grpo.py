"""GRPO maths against values worked out by hand."""

import math

import pytest
import torch
from grpo_support import group_advantages_loop

from proofrl.objectives.grpo import (
    ADV_ESTIMATORS,
    AGG_MODES,
    KL_ESTIMATORS,
    POLICY_LOSSES,
    GroupBuffer,
    PPOConfig,
    Registry,
    RolloutBatch,
    agg_loss,
    group_advantages,
    grpo_step,
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
        ("seq-mean-token-sum-norm", (6.0 + 4.0) / 2 / 3),  # verl 0.9.1: the row mean, then divided by T = 3
        ("token-sum-norm", (6.0 + 4.0) / 3),  # the older semantics: divided by T = 3 only, not by the rows
    ],
)
def test_agg_modes_by_hand(mode, expected):
    assert agg_loss(LOSS, MASK, mode).item() == pytest.approx(expected)


def test_seq_mean_token_sum_norm_uses_constant_horizon():
    assert agg_loss(LOSS, MASK, "seq-mean-token-sum-norm", horizon=5).item() == pytest.approx(10 / 2 / 5)
    assert agg_loss(LOSS, MASK, "token-sum-norm", horizon=5).item() == pytest.approx(10 / 5)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
@pytest.mark.parametrize("horizon", [None, 11])
def test_agg_modes_agree_with_verls_own_agg_loss(mode, horizon):
    """Every mode verl has gives verl 0.9.1's number (H = ``loss_scale_factor``), on rows of different lengths,
    an empty row included, at two batch sizes (the Dr.GRPO mode used to differ by the number of rows)."""
    core = pytest.importorskip("verl.trainer.ppo.core_algos", reason="verl is not installed (the distributed extra)")
    g = torch.Generator().manual_seed(0)
    for rows in (3, 7):
        loss = torch.randn(rows, 6, generator=g)
        mask = (torch.arange(6)[None, :] < torch.randint(0, 7, (rows,), generator=g)[:, None]).float()
        mask[0] = 0.0
        mask[1, :2] = 1.0
        theirs = core.agg_loss(loss, mask, mode, loss_scale_factor=horizon)
        assert agg_loss(loss, mask, mode, horizon=horizon).item() == pytest.approx(theirs.item(), rel=1e-5, abs=1e-6)


def test_agg_keeps_leading_dimensions_independent():
    stacked = torch.stack([LOSS, 2 * LOSS])
    out = agg_loss(stacked, torch.stack([MASK, MASK]), "token-mean")
    assert out.tolist() == pytest.approx([2.5, 5.0])
    assert set(AGG_MODES.names()) == {
        "token-mean",
        "seq-mean-token-mean",
        "seq-mean-token-sum",
        "seq-mean-token-sum-norm",
        "token-sum-norm",
    }


def _clip_case(ratio: float, adv: float, low=0.2, high=0.3):
    logp = torch.tensor([[math.log(ratio)]], requires_grad=True)
    out = ppo_clip_loss(
        logp, torch.zeros(1, 1), torch.tensor([adv]), torch.ones(1, 1), clip_ratio_low=low, clip_ratio_high=high
    )
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
    out = ppo_clip_loss(
        logp,
        logp,
        torch.tensor([0.0]),
        torch.ones(1, 1),
        ref_logp=torch.tensor([[math.log(0.25)]]),
        kl_coef=0.1,
        kl_kind="k1",
    )
    assert out.loss.item() == pytest.approx(0.1 * math.log(2))
    assert out.kl == pytest.approx(math.log(2))


def _tabular(theta):
    actions = torch.tensor([0, 1])

    def logp_fn(rows):
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
    stats = ppo_update(
        fn, batch, opt, PPOConfig(epochs=3, minibatch_rows=1), generator=torch.Generator().manual_seed(0)
    )
    assert stats.steps == 6
    theta2 = torch.zeros(3, requires_grad=True)
    stats = ppo_update(
        _tabular(theta2), batch, torch.optim.SGD([theta2], lr=1.0), PPOConfig(epochs=2, skip_grad_norm=0.5)
    )
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


# ------------------------------------------------------------------------------ dual clip, clipping, skips


def test_dual_clip_caps_the_loss_of_negative_advantages_by_hand():
    # A = -1, rho = 4 > c = 3: PPO-clip's loss -A rho = 4 (unbounded, gradient 4); dual-clip caps it at -A c = 3
    logp = torch.tensor([[math.log(4.0)]], requires_grad=True)
    out = ppo_clip_loss(logp, torch.zeros(1, 1), torch.tensor([-1.0]), torch.ones(1, 1), clip_ratio_c=3.0)
    out.loss.backward()
    assert out.loss.item() == pytest.approx(3.0) and logp.grad.item() == 0.0
    assert out.dual_clipfrac == 1.0 and out.clipfrac == 0.0
    logp.grad = None
    plain = ppo_clip_loss(logp, torch.zeros(1, 1), torch.tensor([-1.0]), torch.ones(1, 1), policy_loss="ppo-clip")
    plain.loss.backward()
    assert plain.loss.item() == pytest.approx(4.0) and logp.grad.item() == pytest.approx(4.0)
    # below the cap and for positive advantages dual-clip is PPO-clip
    for ratio, adv in ((2.0, -1.0), (0.5, -1.0), (4.0, 1.0), (0.5, 1.0)):
        lp = torch.tensor([[math.log(ratio)]])
        a = ppo_clip_loss(lp, torch.zeros(1, 1), torch.tensor([adv]), torch.ones(1, 1)).loss.item()
        b = ppo_clip_loss(
            lp, torch.zeros(1, 1), torch.tensor([adv]), torch.ones(1, 1), policy_loss="ppo-clip"
        ).loss.item()
        assert a == b


def test_policy_losses_are_registered_and_dual_clip_is_the_default():
    assert POLICY_LOSSES.names() == ["dual-clip", "ppo-clip"]
    cfg = PPOConfig()
    assert cfg.policy_loss == "dual-clip" and cfg.clip_ratio_c == 3.0  # verl's defaults
    with pytest.raises(ValueError, match=r"valid choices: \['dual-clip', 'ppo-clip'\]"):
        ppo_clip_loss(torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1), torch.ones(1, 1), policy_loss="vanilla")
    with pytest.raises(ValueError, match="clip_ratio_c must be > 1"):
        ppo_clip_loss(torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1), torch.ones(1, 1), clip_ratio_c=1.0)


def test_gradient_norm_is_clipped_to_one_by_default():
    # token-mean loss -(rho0 - rho1)/2 with A = ±10: gradient 10 x [-1/2, 1/2, 0], norm 10/sqrt(2) ~ 7.07
    theta = torch.zeros(3, requires_grad=True)
    fn = _tabular(theta)
    with torch.no_grad():
        old = fn(torch.arange(2))
    assert PPOConfig().max_grad_norm == 1.0
    batch = RolloutBatch(old, torch.tensor([10.0, -10.0]), torch.ones(2, 1))
    stats = ppo_update(fn, batch, torch.optim.SGD([theta], lr=1.0), PPOConfig())
    assert stats.grad_norm == pytest.approx(10 / math.sqrt(2), rel=1e-5)  # logged before clipping
    assert theta.norm().item() == pytest.approx(1.0, rel=1e-5)  # the step taken is the clipped gradient
    assert theta.tolist() == pytest.approx([1 / math.sqrt(2), -1 / math.sqrt(2), 0.0], rel=1e-5)


def test_nonfinite_gradient_norm_skips_the_step_and_is_counted():
    theta = torch.zeros(3, requires_grad=True)
    fn = _tabular(theta)
    with torch.no_grad():
        old = fn(torch.arange(2))
    batch = RolloutBatch(old, torch.tensor([1.0, -1.0]), torch.ones(2, 1))
    nan_fn = lambda rows: fn(rows) * torch.tensor(float("nan"))  # noqa: E731
    opt = torch.optim.AdamW([theta], lr=0.1)
    stats = ppo_update(nan_fn, batch, opt, PPOConfig(epochs=2, max_grad_norm=None))
    assert (stats.steps, stats.skipped, stats.nonfinite) == (2, 2, 2)
    assert theta.tolist() == [0.0, 0.0, 0.0] and not opt.state  # no step, no optimiser state
    stats = ppo_update(fn, batch, opt, PPOConfig(epochs=1))
    assert (stats.skipped, stats.nonfinite) == (0, 0) and theta.abs().sum() > 0


# ------------------------------------------------------------------------------ gradient accumulation


class GradCapture(torch.optim.Optimizer):
    """An optimiser that records the gradient of every step and changes nothing."""

    def __init__(self, params):
        super().__init__(params, {})
        self.grads: list[list[torch.Tensor]] = []

    def step(self, closure=None):
        self.grads.append([p.grad.detach().clone() for g in self.param_groups for p in g["params"]])


def _token_policy(seed: int, rows: int = 5, length: int = 4, vocab: int = 7):
    """A small softmax policy over tokens with per-row context, rows of different lengths (one empty)."""
    g = torch.Generator().manual_seed(seed)
    w = torch.nn.Parameter(torch.randn(length, vocab, generator=g))
    ctx = torch.randn(rows, 1, vocab, generator=g)
    tokens = torch.randint(0, vocab, (rows, length), generator=g)
    mask = torch.ones(rows, length)
    for i, n in enumerate([4, 2, 0, 3, 1][:rows]):
        mask[i, n:] = 0

    def fn(idx: torch.Tensor) -> torch.Tensor:
        logits = w.unsqueeze(0) + ctx.index_select(0, idx)  # (b, T, V)
        return torch.log_softmax(logits, -1).gather(-1, tokens.index_select(0, idx).unsqueeze(-1)).squeeze(-1)

    return w, fn, mask


@pytest.mark.parametrize("agg_mode", sorted(AGG_MODES.names()))
@pytest.mark.parametrize("policy_loss", ["dual-clip", "ppo-clip"])
def test_accumulated_gradient_equals_the_minibatch_gradient(agg_mode, policy_loss):
    """Micro-batches of 1 row, each with its own backward, give the whole mini-batch's gradient (KL on, a
    second epoch so ρ ≠ 1 and clipping acts, an empty row, rows of different lengths)."""
    grads = {}
    for micro in (None, 1, 2):
        w, fn, mask = _token_policy(0)
        with torch.no_grad():
            old = fn(torch.arange(5)) + 0.3 * torch.randn(5, 4, generator=torch.Generator().manual_seed(1))
            ref = old - 0.5
        batch = RolloutBatch(old * mask, torch.tensor([1.5, -1.0, 0.7, -2.0, 0.4]), mask, ref * mask)
        opt = GradCapture([w])
        cfg = PPOConfig(
            epochs=2,
            agg_mode=agg_mode,
            policy_loss=policy_loss,
            kl_coef=0.3,
            horizon=6,
            max_grad_norm=None,
            clip_ratio_c=1.5,
        )
        ppo_update(fn, batch, opt, cfg, micro_batch_rows=micro)
        grads[micro] = torch.cat([g.flatten() for step in opt.grads for g in step])
    for micro in (1, 2):
        assert (grads[micro] - grads[None]).norm() <= 1e-5 * grads[None].norm(), micro
    assert grads[None].norm() > 0


def test_minibatches_of_an_epoch_use_their_own_divisors():
    # two mini-batches of one row each: each step divides by its own token count, not the batch's
    w, fn, mask = _token_policy(0, rows=2)
    with torch.no_grad():
        old = fn(torch.arange(2))
    opt = GradCapture([w])
    ppo_update(
        fn,
        RolloutBatch(old * mask, torch.tensor([1.0, -1.0]), mask),
        opt,
        PPOConfig(minibatch_rows=1, shuffle=False, max_grad_norm=None),
    )
    for row, g in enumerate(opt.grads):
        w.grad = None
        ppo_clip_loss(
            fn(torch.tensor([row])), old[row : row + 1], torch.tensor([[1.0, -1.0][row]]), mask[row : row + 1]
        ).loss.backward()
        assert torch.allclose(g[0], w.grad, atol=1e-7)


# ------------------------------------------------------------------------------ the shared step, the buffer


def test_grpo_step_groups_within_each_leading_index():
    theta = torch.zeros(2, 3, requires_grad=True)  # two independent runs, as the toy's seeds
    actions = torch.tensor([0, 1, 2, 0])

    def fn(rows):
        return torch.log_softmax(theta, -1)[:, actions].index_select(1, rows).unsqueeze(-1)  # (2, b, 1)

    with torch.no_grad():
        old = fn(torch.arange(4))
    rewards = torch.tensor([[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0]])
    step = grpo_step(
        fn, rewards, torch.tensor([5, 5, 9, 9]), old, torch.ones(2, 4, 1), torch.optim.SGD([theta], lr=0.1)
    )
    for run in range(2):
        assert torch.equal(step.advantages[run], group_advantages(rewards[run], torch.tensor([5, 5, 9, 9])))
    assert step.stats.steps == 1
    with pytest.raises(ValueError, match="valid choices"):
        grpo_step(
            fn,
            rewards,
            torch.tensor([5, 5, 9, 9]),
            old,
            torch.ones(2, 4, 1),
            torch.optim.SGD([theta], lr=0.1),
            advantage="ppo",
        )


def test_buffer_state_round_trips():
    buf: GroupBuffer[str] = GroupBuffer(target_samples=10)
    buf.add([1, 0], "a")
    buf.add([1, 1], "dropped")
    buf.add([0, 1, 1], "b")
    other: GroupBuffer[str] = GroupBuffer(target_samples=10)
    other.load_state_dict(buf.state_dict())
    assert (other.num_samples, other.kept_groups, other.dropped_groups, len(other)) == (5, 2, 1, 2)
    assert other.take() == ["a", "b"] and buf.take() == ["a", "b"]
