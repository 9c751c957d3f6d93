"""Everything in the update path follows its input tensors' device.

Without a GPU these tests run on *fake* CUDA tensors (``FakeTensorMode``: shapes, dtypes and devices without
data), where mixing a CPU tensor into a CUDA computation raises exactly as on a GPU. A CPU-only build of torch
cannot run autograd or Python ``[]`` indexing on fake CUDA tensors, so the update loop is checked up to its
first backward pass; ``test_update_on_cuda`` runs the real thing where a GPU exists.
"""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from proofrl.objectives.grpo import PPOConfig, RolloutBatch, agg_loss, group_advantages, ppo_update
from proofrl.rewards.unlikeliness import likelihood_ranks, unlikeliness_reward

CUDA = torch.device("cuda:0")


@pytest.fixture
def fake_cuda():
    with FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv()):
        yield


def test_fake_cuda_catches_mixing_devices(fake_cuda):
    # the premise of this file: a CPU tensor in a CUDA computation raises here as it does on a GPU
    with pytest.raises(RuntimeError, match="same device"):
        torch.zeros(3).index_add_(0, torch.zeros(2, dtype=torch.long, device=CUDA), torch.ones(2, device=CUDA))


@pytest.mark.parametrize("ids_on_cuda", [True, False])
def test_group_advantages_stay_on_the_rewards_device(fake_cuda, ids_on_cuda):
    rewards = torch.zeros(6, device=CUDA)
    ids = torch.zeros(6, dtype=torch.long, device=CUDA if ids_on_cuda else "cpu")
    for scale in (True, False):
        adv = group_advantages(rewards, ids, scale_by_std=scale)
        assert adv.device == CUDA and adv.shape == (6,)


def test_likelihood_ranks_and_unlikeliness_reward_stay_on_device(fake_cuda):
    lp = torch.zeros(2, 4, device=CUDA)
    assert likelihood_ranks(lp).device == CUDA
    assert unlikeliness_reward(torch.zeros(2, 4, device=CUDA), lp).device == CUDA


def test_aggregation_stays_on_device(fake_cuda):
    loss, mask = torch.zeros(2, 3, device=CUDA), torch.ones(2, 3, device=CUDA)
    for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"):
        assert agg_loss(loss, mask, mode).device == CUDA


@pytest.mark.parametrize("minibatch_rows", [None, 2])
def test_update_loop_on_cuda_tensors_up_to_the_first_backward(fake_cuda, minibatch_rows):
    """Mini-batch permutation (drawn from a CPU generator), row selection, divisors, policy loss and KL: all on
    the batch's device. The policy here returns a tensor without gradient (fake CUDA tensors cannot run
    autograd on a CPU build), so the loop must get as far as ``backward`` and stop there."""
    table = torch.zeros(4, 1, device=CUDA)
    seen: list[torch.device] = []

    def policy(rows: torch.Tensor) -> torch.Tensor:
        seen.append(rows.device)
        return table.index_select(0, rows)

    batch = RolloutBatch(
        torch.zeros(4, 1, device=CUDA),
        torch.zeros(4, device=CUDA),
        torch.ones(4, 1, device=CUDA),
        torch.zeros(4, 1, device=CUDA),
    )
    opt = torch.optim.SGD([torch.zeros(1, device=CUDA)], lr=1.0)
    with pytest.raises(RuntimeError, match="does not require grad"):
        ppo_update(
            policy,
            batch,
            opt,
            PPOConfig(minibatch_rows=minibatch_rows, kl_coef=0.1),
            generator=torch.Generator().manual_seed(0),
        )
    assert seen == [CUDA]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_update_on_cuda():
    from proofrl.objectives.grpo import grpo_step

    theta = torch.zeros(3, device="cuda", requires_grad=True)
    actions = torch.tensor([0, 1, 2, 0], device="cuda")

    def policy(rows: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(theta, -1)[actions[rows]].unsqueeze(-1)

    with torch.no_grad():
        old = policy(torch.arange(4, device="cuda"))
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0], device="cuda")
    step = grpo_step(
        policy,
        rewards,
        torch.tensor([0, 0, 1, 1]),
        old,
        torch.ones(4, 1, device="cuda"),
        torch.optim.AdamW([theta], lr=0.1),
        PPOConfig(epochs=2, minibatch_rows=2, kl_coef=0.1),
        ref_logps=old,
        micro_batch_rows=1,
        generator=torch.Generator().manual_seed(0),
    )
    assert step.advantages.device.type == "cuda" and step.stats.steps == 4 and theta.abs().sum() > 0
    assert unlikeliness_reward(rewards.view(2, 2), old.view(2, 2)).device.type == "cuda"
