"""Training loops other than whole-proof GRPO, by recipe name: ``proofrl train --recipe reap`` (search-and-learn),
``leanlistener`` (step-level GRPO), ``eva`` (the EVA reward model).

Each loop owns its config schema (its recipe YAML in ``proofrl/recipes/`` says ``loop: NAME``) and a runner
``run(recipe, overrides, *, show_config=False)``; the entry is imported only when it runs. A recipe file of the
user's own picks its loop the same way (``loop: reap``); without ``loop`` it is a whole-proof recipe.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..registry import load_target


@dataclass(frozen=True)
class Loop:
    name: str
    target: str
    """``module:function``: ``run(recipe: str, overrides: list[str], *, show_config: bool = False) -> None``"""

    def load(self) -> Any:
        return load_target(self.target)


LOOPS: dict[str, Loop] = {loop.name: loop for loop in (
    Loop("reap", "proofrl.train.expert_iteration:run_recipe"),
    Loop("leanlistener", "proofrl.train.step_grpo:run_recipe"),
    Loop("eva", "proofrl.train.eva:run_recipe"),
)}  # fmt: skip


def recipe_tree(recipe: str | Path) -> dict[str, Any]:
    """The YAML mapping of a recipe name (``proofrl/recipes/NAME.yaml``) or path; a clear error otherwise."""
    from .config import RECIPES_DIR, recipe_names

    path = RECIPES_DIR / f"{recipe}.yaml" if str(recipe) in recipe_names() else Path(recipe)
    if not path.is_file():
        raise ConfigError(f"unknown recipe {str(recipe)!r}; valid: {recipe_names()} or a YAML path")
    try:
        tree = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not YAML: {' '.join(str(e).split())}") from None
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: a recipe must be a mapping")
    return tree


def loop_for(recipe: str | Path) -> Loop | None:
    """The loop a recipe runs under (its ``loop:`` key), or ``None`` for whole-proof GRPO."""
    name = recipe_tree(recipe).get("loop")
    if name is None:
        return None
    if name not in LOOPS:
        raise ConfigError(f"{recipe}: loop {name!r} is not a training loop; valid: {sorted(LOOPS)} (or no loop: whole-proof GRPO)")
    return LOOPS[name]
