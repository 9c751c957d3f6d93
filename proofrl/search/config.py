"""Typed search settings (:class:`~proofrl.schema.Config`: unknown keys refused, one-line errors) and the
published defaults of each search, as YAML recipes in ``proofrl/recipes/search/`` overridden with ``--set``, as
the training recipes are.

* ``reap`` — frenzymath/reap ``Reap/Options.lean`` (AlphaProof pseudocode constants): ``num_samples`` 6,
  ``c_base`` 3200, ``c_init`` 0.001, ``visit_discount`` (γ) 0.99, ``prior_temperature`` (τ) 50,
  progressive sampling c 0.01 and α 0.6, ``max_goals`` (nodes) 64, ``max_steps`` 64, ``timeout`` 200 s a tactic.
* ``bfs-prover`` — zeyu-zheng/BFS-Prover-V2 ``run_local_search.sh``: 4 tactics per expansion, score
  Σ (mean token log-prob) / depth^2.0 (``depth_reward``), 600 s per theorem, 18 s wall a tactic.
* ``reprover`` — lean-dojo/ReProver ``prover/proof_search.py``: 64 tactics per expansion, priority Σ log-prob
  of the path, 600 s per theorem, no expansion limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ..errors import ConfigError
from ..schema import Config, apply_overrides, read_mapping, set_dotted, validate

Positive = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(ge=1)]
SEARCH_RECIPES_DIR = Path(__file__).resolve().parent.parent / "recipes" / "search"


BEST_FIRST_KEYS = ("priority", "logprob", "alpha")
"""the keys the earlier schema's ``best_first:`` section held that no other engine reads (:func:`upgrade_saved`)"""
MCTS_KEYS = (
    "c_base",
    "c_init",
    "discount",
    "prior_temperature",
    "progressive_sampling_c",
    "progressive_sampling_alpha",
    "max_nodes",
    "value",
    "failed_value",
)
"""the keys the earlier schema's ``mcts:`` section held that no other engine reads"""
DEFAULT_RECIPE = {"mcts": "reap", "best-first": "reprover"}
"""the recipe an algorithm named alone stands for (``proofrl search --algorithm best-first``)"""
MOVED = {"best_first.width": "width", "best_first.max_expansions": "max_steps", "mcts.num_samples": "width"}
"""keys of the earlier schema's two engine sections whose name changed (every other key moved up as it was)"""


class SearchConfig(Config):
    """One search section for both engines: the budget they share once (``width``, ``max_steps``, ``seconds``,
    ``tactic_timeout``: one set of keys gives best-first and MCTS the same budget), then each engine's own keys.
    The defaults are reap's (the default algorithm, ``Reap/Options.lean``); the recipes set each system's."""

    algorithm: Literal["best-first", "mcts"] = "mcts"
    width: PositiveInt = 6
    """tactics the policy proposes per expansion (reap ``num_samples`` 6; ReProver ``num_sampled_tactics`` 64;
    BFS-Prover-V2 4)"""
    max_steps: PositiveInt | None = 64
    """policy calls per theorem at most: best-first expansions, MCTS selection-expansion-backup steps (reap
    ``max_steps`` 64; ReProver and BFS-Prover-V2: None, no limit)"""
    seconds: Positive | None = None
    """wall-clock budget per theorem (reap: None; ReProver and BFS-Prover-V2: 600 s)"""
    tactic_timeout: Positive = 200.0
    """seconds a tactic may run (reap ``timeout`` 200000 ms; BFS-Prover-V2 18 s wall; ReProver 10 s)"""
    final_check_timeout: Positive = 60.0
    """seconds for the fresh-process replay of a found proof"""
    backend: Literal["coq", "lean"] = "coq"

    # -- best-first only (ReProver, BFS-Prover) --
    priority: Literal["cum_logprob", "length_normalized"] = "cum_logprob"
    """best-first: ``cum_logprob``: Σ log-prob of the path's tactics (ReProver, GPT-f); ``length_normalized``:
    that sum / depth^alpha (BFS-Prover)"""
    logprob: Literal["sum", "mean"] = "sum"
    """best-first: each tactic's log-prob, the sum over its tokens (ReProver) or their mean (BFS-Prover-V2)"""
    alpha: Annotated[float, Field(ge=0)] = 2.0
    """best-first: the depth exponent of ``length_normalized`` (BFS-Prover-V2 ``depth_reward`` 2.0; REAL-Prover
    0.5)"""

    # -- MCTS only (reap, the AlphaProof pseudocode) --
    c_base: Positive = 3200.0
    c_init: Annotated[float, Field(ge=0)] = 0.001
    discount: Annotated[float, Field(gt=0, le=1)] = 0.99
    """MCTS: γ (``reap.visit_discount``): Q = γ^(−1 − (v̄ − cost))"""
    prior_temperature: Positive = 50.0
    """MCTS: τ, prior = exp(Σ token log-prob / τ) (reap 50; the AlphaProof pseudocode 200)"""
    progressive_sampling_c: Annotated[float, Field(ge=0)] = 0.01
    progressive_sampling_alpha: Annotated[float, Field(ge=0)] = 0.6
    """MCTS: an expanded OR node is expanded again when evaluations ≤ c · N^α"""
    max_nodes: PositiveInt = 64
    """MCTS: the loop runs while the tree has at most this many nodes (``reap.max_goals``)"""
    value: Literal["model", "goals", "zero"] = "model"
    """MCTS leaf values: ``model``: the value function given to the search (reap's value endpoint; without one,
    ``goals``); ``goals``: −(open goals); ``zero``: 0"""
    failed_value: float = -1000.0
    """MCTS: the value of a leaf whose value call failed and of a dead end (reap: −1000 on failure)"""

    @model_validator(mode="before")
    @classmethod
    def _engine_sections_moved(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and (old := [k for k in ("best_first", "mcts") if k in data]):
            keys = sorted({f"{k}.{sub}" for k in old if isinstance(data[k], Mapping) for sub in data[k]})
            moved = [f"{k} is {MOVED.get(k, k.split('.', 1)[1])}" for k in keys]
            raise ConfigError(
                f"{' and '.join(old)}: "
                + ("no longer sections, their keys are" if len(old) > 1 else "no longer a section, its keys are")
                + f" one level up ({'; '.join(moved) or 'best_first.width and mcts.num_samples are width'})"
            )
        return data

    def with_overrides(self, **changes: Any) -> SearchConfig:
        """A copy with keys changed (``{"max_steps": 8}``), validated again."""
        data = self.to_dict()
        for key, value in changes.items():
            set_dotted(data, key.replace("__", "."), value)
        return validate(SearchConfig, data, "search")

    def with_set(self, overrides: tuple[str, ...] | list[str]) -> SearchConfig:
        """A copy with ``--set`` overrides applied (``max_steps=8``, values read as YAML), validated again."""
        return validate(SearchConfig, apply_overrides(self.to_dict(), overrides), "search") if overrides else self


def search_recipe_names() -> list[str]:
    return sorted(p.stem for p in SEARCH_RECIPES_DIR.glob("*.yaml"))


def load_search_config(recipe: str | Path | None = None, /, *overrides: str, **changes: Any) -> SearchConfig:
    """A recipe name (``reap``, ``bfs-prover``, ``reprover``: ``proofrl/recipes/search/NAME.yaml``) or a YAML
    file, then ``--set`` style ``overrides`` (``"max_steps=8"``), then ``changes`` from code
    (``max_steps=8``)."""
    if recipe is None:
        tree: dict[str, Any] = {}
    elif str(recipe) in search_recipe_names():
        tree = read_mapping(SEARCH_RECIPES_DIR / f"{recipe}.yaml")
    elif Path(recipe).is_file():
        tree = read_mapping(Path(recipe))
    else:
        raise ConfigError(f"unknown search recipe {str(recipe)!r}; valid: {search_recipe_names()} or a YAML path")
    cfg = validate(SearchConfig, apply_overrides(tree, overrides), "search")
    return cfg.with_overrides(**changes) if changes else cfg


def upgrade_saved(saved: Mapping[str, Any]) -> dict[str, Any]:
    """A search section saved by the earlier schema (``best_first:`` and ``mcts:`` sections) as it reads now: the
    section of its ``algorithm`` one level up (renamed as :data:`MOVED` says), and of the other engine's section
    only the keys that are that engine's alone (the budget keys it held never ran). A flat section is returned as
    it is."""
    out = {k: v for k, v in saved.items() if k not in ("best_first", "mcts")}
    best_first = saved.get("algorithm") == "best-first"
    ran, other = ("best_first", "mcts") if best_first else ("mcts", "best_first")
    others_own: tuple[str, ...] = MCTS_KEYS if best_first else BEST_FIRST_KEYS
    for key, value in (saved.get(other) or {}).items():
        if key in others_own:
            out[key] = value
    for key, value in (saved.get(ran) or {}).items():
        out[MOVED.get(f"{ran}.{key}", key)] = value
    return out
