"""The unlikeliness reward of "Rewarding the Unlikely" (He, Fried, Welleck; arXiv:2506.02355, eq. 3) on verl.

    r_i = R_i · (1 − β_rank · (G − rank_i) / G),  rank_i by π_old's sequence log-prob within the group

The rank penalty needs π_old's log-probs of each response, which verl computes after the rewards. Its
registered advantage estimators receive rewards, masks and group ids but no log-probs, so the hook sits where
all of them meet: the V1 trainer's ``_compute_advantage`` (``verl/trainer/ppo/v1/trainer_base.py``), which
already has ``rm_scores``, ``old_log_probs``, ``response_mask`` and ``uid``. :class:`UnlikelinessTrainer` is
verl's synchronous trainer with that step reshaping the scores first, registered with verl's
``register_trainer`` under ``proofrl_unlikeliness``; ``proofrl train --engine verl`` selects it
(:mod:`proofrl.verl.main`).

The formula is proofrl's one (:class:`proofrl.rewards.combine.RewardFn` ``.shape_group`` →
:func:`proofrl.rewards.unlikeliness.unlikeliness_reward`), applied per group by :func:`shape_scores`.
Uninformative groups (all rewards equal) are left as they are: the paper drops them before shaping (verl drops
them with ``algorithm.filter_groups``; a group that still arrives gets no invented signal). The settings are
the recipe's ``reward.unlikeliness`` (β_rank 0.25, ``paper`` convention, ``mean`` reduction).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..rewards.combine import RewardFn
from ..rewards.compose import RewardConfig

NAME = "proofrl_unlikeliness"


def shape_scores(
    scores: torch.Tensor,
    old_log_probs: torch.Tensor,
    response_mask: torch.Tensor,
    uid: Sequence[Any] | np.ndarray,
    cfg: RewardConfig,
) -> torch.Tensor:
    """verl's token-level scores ``(B, T)`` (the sample's reward sums over its tokens) after each group's shapers.

    ``old_log_probs (B, T)`` are π_old's token log-probs, ``response_mask (B, T)`` 1 on the model's tokens,
    ``uid (B,)`` the group of each row. A row's change is added on its last response token, so every
    estimator that sums token scores (GRPO's does) sees the shaped reward. Groups whose rewards are all equal
    are returned unchanged."""
    if not (scores.shape == old_log_probs.shape == response_mask.shape) or len(uid) != scores.shape[0]:
        raise ValueError(
            f"expected scores, old_log_probs, response_mask (B, T) and uid (B,); got {tuple(scores.shape)}, "
            f"{tuple(old_log_probs.shape)}, {tuple(response_mask.shape)}, {len(uid)}"
        )
    fn = RewardFn(cfg)
    out = scores.clone().float()
    rewards = out.sum(-1)
    mask = response_mask.float()
    # the last response token of each row (its position counted from the right, so padding is skipped)
    last = mask.shape[1] - 1 - torch.flip(mask, dims=[1]).argmax(-1)
    groups: dict[Any, list[int]] = {}
    for i, u in enumerate(uid):
        groups.setdefault(u, []).append(i)
    for rows in groups.values():
        idx = torch.tensor(rows)
        r = rewards[idx]
        if bool((r == r[0]).all()):
            continue  # uninformative: no signal to shape (the paper drops these before ranking)
        shaped = fn.shape_group(r, old_log_probs[idx].float(), mask[idx])
        out[idx, last[idx]] += shaped - r
    return out


def _trainer_class() -> type:
    """:class:`UnlikelinessTrainer`, built on import of verl (its trainer module needs TransferQueue)."""
    import transfer_queue as tq
    from omegaconf import open_dict
    from tensordict import TensorDict
    from verl.trainer.ppo.v1 import PPOTrainerSync, register_trainer
    from verl.workers.utils.padding import response_to_nested

    from .reward import judge_for

    @register_trainer(NAME)
    class UnlikelinessTrainer(PPOTrainerSync):
        """verl's synchronous V1 trainer; its advantage step first applies :func:`shape_scores`."""

        def __init__(self, config: Any):
            # verl branches on the mode's string ("sync" vs the async modes); this trainer is the sync one
            with open_dict(config):
                config.trainer.v1.trainer_mode = "sync"
            super().__init__(config)
            kwargs = config.reward.custom_reward_function.get("reward_kwargs") or {}
            judge = judge_for(dict(kwargs))
            if judge.reward.cfg.unlikeliness is None:
                raise ValueError(f"trainer mode {NAME} needs reward.unlikeliness in the recipe (reward_kwargs.recipe)")
            self.unlikeliness_cfg = RewardConfig(unlikeliness=judge.reward.cfg.unlikeliness)

        def _compute_advantage(self, batch: Any, metrics: dict) -> Any:
            fields = ["uid", "response_mask", "rm_scores", "old_log_probs"]
            data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
            nested_mask = data["response_mask"]
            padded = data.to_padded_tensor()
            uid = np.array(padded.pop("uid").tolist(), dtype=object)
            before = padded["rm_scores"].float()
            shaped = shape_scores(before, padded["old_log_probs"], padded["response_mask"], uid, self.unlikeliness_cfg)
            metrics["proofrl/unlikeliness_change_mean"] = float((shaped - before).sum(-1).mean())
            tq.kv_batch_put(
                keys=batch.keys,
                partition_id=batch.partition_id,
                fields=TensorDict({"rm_scores": response_to_nested(shaped, nested_mask)}, batch_size=len(batch)),
            )
            return super()._compute_advantage(batch, metrics)

    return UnlikelinessTrainer


def __getattr__(name: str) -> Any:  # ``UnlikelinessTrainer`` on first use: importing this module needs no verl
    if name == "UnlikelinessTrainer":
        cls = _trainer_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)
