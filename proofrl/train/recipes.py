"""Recipes and the training loops they run: one registry of loops, one recipe reader, one override rule.

A recipe (``proofrl/recipes/NAME.yaml`` or a YAML path) is a mapping checked by its loop's schema (a
:class:`~proofrl.schema.Config`); its ``loop:`` key names the loop (none: whole-proof GRPO). ``--set
key.sub=value`` overrides one leaf (the value read as YAML). ``proofrl train --recipe R`` is :func:`load`, then
the loop's runner:

====================  ====================================================  ==============================
loop                  schema (:mod:`proofrl.train.config`)                  what it trains (recipes)
====================  ====================================================  ==============================
``grpo`` (default)    :class:`~proofrl.train.config.GRPOConfig`             whole-proof GRPO (demo, unlikeliness,
                                                                            kimina, deepseek-v1.5)
``expert-iteration``  :class:`~proofrl.train.config.ExpertIterationConfig`  search-and-learn (reap)
``step-grpo``         :class:`~proofrl.train.config.StepGRPOConfig`         step-level GRPO / DPO (leanlistener)
``eva``               :class:`~proofrl.train.config.EvaConfig`              the EVA reward model (eva)
====================  ====================================================  ==============================

Each loop's schema and runner (``run(cfg)``) are named by ``module:attribute`` and imported only when used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..registry import load_target
from ..schema import apply_overrides as apply_overrides
from ..schema import read_mapping, validate

RECIPES_DIR = Path(__file__).resolve().parent.parent / "recipes"


@dataclass(frozen=True)
class Loop:
    name: str
    schema: str
    """``module:Class``, the loop's config section"""
    runner: str
    """``module:function``: ``run(cfg) -> None``, trains by a checked config"""

    def config(self, recipe: str | Path | None, overrides: Sequence[str] = ()) -> Any:
        """The recipe (name, path, or None: the schema's defaults) with ``overrides``, checked by this loop's
        schema; one :class:`ConfigError` line on any mistake."""
        tree = recipe_tree(recipe) if recipe else {}
        found = tree.get("loop", DEFAULT_LOOP if recipe else self.name)
        if found != self.name:
            hint = f": proofrl train --recipe {recipe}" if found in LOOPS else ""
            raise ConfigError(f"recipe {str(recipe)!r} runs the {found!r} loop, not {self.name!r}{hint}")
        return validate(load_target(self.schema), apply_overrides(tree, overrides))

    @property
    def train(self) -> Callable[[Any], Any]:
        """The loop's ``run(cfg)``, imported now."""
        return load_target(self.runner)


DEFAULT_LOOP = "grpo"
LOOPS: dict[str, Loop] = {
    loop.name: loop
    for loop in (
        Loop("grpo", "proofrl.train.config:GRPOConfig", "proofrl.train.whole_proof:run"),
        Loop("expert-iteration", "proofrl.train.config:ExpertIterationConfig", "proofrl.train.expert_iteration:run"),
        Loop("step-grpo", "proofrl.train.config:StepGRPOConfig", "proofrl.train.step_grpo:run"),
        Loop("eva", "proofrl.train.config:EvaConfig", "proofrl.train.eva:run"),
    )
}


def recipe_names() -> list[str]:
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


def recipe_tree(recipe: str | Path) -> dict[str, Any]:
    """The YAML mapping of a recipe name (``proofrl/recipes/NAME.yaml``) or path; a clear error otherwise."""
    path = RECIPES_DIR / f"{recipe}.yaml" if str(recipe) in recipe_names() else Path(recipe)
    if not path.is_file():
        raise ConfigError(f"unknown recipe {str(recipe)!r}; valid: {recipe_names()} or a YAML path")
    return read_mapping(path)


def loop_for(recipe: str | Path) -> Loop:
    """The loop a recipe runs under (its ``loop:`` key; none: whole-proof GRPO)."""
    name = recipe_tree(recipe).get("loop", DEFAULT_LOOP)
    if name not in LOOPS:
        raise ConfigError(f"{recipe}: loop {name!r} is not a training loop; valid: {sorted(LOOPS)}")
    return LOOPS[name]


def load(recipe: str | Path, overrides: Sequence[str] = ()) -> tuple[Loop, Any]:
    """The loop a recipe runs under and its config, with ``overrides``, checked by that loop's schema."""
    loop = loop_for(recipe)
    return loop, loop.config(recipe, overrides)
