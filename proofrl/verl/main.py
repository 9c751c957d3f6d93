"""verl's PPO entry point with proofrl's pieces registered: ``python -m proofrl.verl.main <Hydra overrides>``.

The same as ``python -m verl.trainer.main_ppo`` (verl's ``ppo_trainer`` config, its checks, ``run_ppo``), except
that the task runner is :class:`ProofrlTaskRunner`: verl's V1 runner in a process that has imported
:mod:`proofrl.verl.unlikeliness`, so ``trainer.v1.trainer_mode=proofrl_unlikeliness`` names a registered trainer.
``proofrl train --engine verl`` writes the overrides and runs this module.
"""

from __future__ import annotations

from typing import Any, cast

import hydra
import ray
from verl.trainer.main_ppo import TaskRunnerV1, run_ppo
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import validate_config
from verl.utils.device import auto_set_device

_VerlRunner: Any = cast(Any, TaskRunnerV1).__ray_actor_class__  # verl's runner class under its Ray wrapper


class _Runner(_VerlRunner):
    """verl's V1 task runner; proofrl's trainer is registered in its process before verl looks the mode up."""

    def run(self, config: Any) -> Any:
        from . import unlikeliness

        unlikeliness.UnlikelinessTrainer  # noqa: B018  (building the class registers it with verl)
        return super().run(config)


ProofrlTaskRunner = ray.remote(_Runner)


@hydra.main(config_path="pkg://verl.trainer.config", config_name="ppo_trainer", version_base=None)
def main(config: Any) -> None:
    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    run_ppo(config, task_runner_class=ProofrlTaskRunner)


if __name__ == "__main__":
    main()
