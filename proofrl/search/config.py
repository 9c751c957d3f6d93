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

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from ..errors import ConfigError
from ..schema import Config, apply_overrides, read_mapping, set_dotted, validate

Positive = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(ge=1)]
SEARCH_RECIPES_DIR = Path(__file__).resolve().parent.parent / "recipes" / "search"


class BestFirstConfig(Config):
    """Best-first search over whole goal lists (no AND decomposition), as ReProver / BFS-Prover."""

    priority: Literal["cum_logprob", "length_normalized"] = "cum_logprob"
    """``cum_logprob``: Σ log-prob of the path's tactics (ReProver, GPT-f); ``length_normalized``:
    that sum / depth^alpha (BFS-Prover)"""
    logprob: Literal["sum", "mean"] = "sum"
    """each tactic's log-prob: the sum over its tokens (ReProver) or their mean (BFS-Prover-V2)"""
    alpha: Annotated[float, Field(ge=0)] = 2.0
    """the depth exponent of ``length_normalized`` (BFS-Prover-V2 ``depth_reward`` 2.0; REAL-Prover 0.5)"""
    width: PositiveInt = 64
    """tactics proposed per expansion (ReProver ``num_sampled_tactics`` 64; BFS-Prover-V2 4)"""
    max_expansions: PositiveInt | None = None
    """nodes expanded at most (ReProver: None)"""
    seconds: Positive | None = 600.0
    """wall-clock budget per theorem (ReProver and BFS-Prover-V2: 600 s)"""
    tactic_timeout: Positive = 10.0
    """seconds a tactic may run (BFS-Prover-V2: 18 s wall)"""


class MCTSConfig(Config):
    """AND-OR MCTS as reap / the AlphaProof pseudocode (defaults from ``Reap/Options.lean``)."""

    num_samples: PositiveInt = 6
    """tactics proposed per expansion (``reap.num_samples``)"""
    c_base: Positive = 3200.0
    c_init: Annotated[float, Field(ge=0)] = 0.001
    discount: Annotated[float, Field(gt=0, le=1)] = 0.99
    """γ (``reap.visit_discount``): Q = γ^(−1 − (v̄ − cost))"""
    prior_temperature: Positive = 50.0
    """τ: prior = exp(Σ token log-prob / τ) (reap 50; the AlphaProof pseudocode 200)"""
    progressive_sampling_c: Annotated[float, Field(ge=0)] = 0.01
    progressive_sampling_alpha: Annotated[float, Field(ge=0)] = 0.6
    """an expanded OR node is expanded again when evaluations ≤ c · N^α"""
    max_nodes: PositiveInt = 64
    """the loop runs while the tree has at most this many nodes (``reap.max_goals``)"""
    max_steps: PositiveInt = 64
    """selection-expansion-backup steps (``reap.max_steps``)"""
    tactic_timeout: Positive = 200.0
    """seconds a tactic may run (``reap.timeout`` 200000 ms)"""
    seconds: Positive | None = None
    """wall-clock budget per theorem (reap has none)"""
    value: Literal["model", "goals", "zero"] = "model"
    """leaf values: ``model``: the value function given to the search (reap's value endpoint; without one,
    ``goals``); ``goals``: −(open goals); ``zero``: 0"""
    failed_value: float = -1000.0
    """the value of a leaf whose value call failed and of a dead end (reap: −1000 on failure)"""


class SearchConfig(Config):
    algorithm: Literal["best-first", "mcts"] = "mcts"
    best_first: BestFirstConfig = BestFirstConfig()
    mcts: MCTSConfig = MCTSConfig()
    final_check_timeout: Positive = 60.0
    """seconds for the fresh-process replay of a found proof"""
    backend: Literal["coq", "lean"] = "coq"

    @property
    def tactic_timeout(self) -> float:
        return self.mcts.tactic_timeout if self.algorithm == "mcts" else self.best_first.tactic_timeout

    def with_overrides(self, **changes: Any) -> SearchConfig:
        """A copy with top-level or dotted keys changed (``{"mcts.max_steps": 8}``), validated again."""
        data = self.to_dict()
        for key, value in changes.items():
            set_dotted(data, key.replace("__", "."), value)
        return validate(SearchConfig, data, "search")

    def with_set(self, overrides: tuple[str, ...] | list[str]) -> SearchConfig:
        """A copy with ``--set`` overrides applied (``mcts.max_steps=8``, values read as YAML), validated again."""
        return validate(SearchConfig, apply_overrides(self.to_dict(), overrides), "search") if overrides else self


def search_recipe_names() -> list[str]:
    return sorted(p.stem for p in SEARCH_RECIPES_DIR.glob("*.yaml"))


def load_search_config(recipe: str | Path | None = None, /, *overrides: str, **changes: Any) -> SearchConfig:
    """A recipe name (``reap``, ``bfs-prover``, ``reprover``: ``proofrl/recipes/search/NAME.yaml``) or a YAML
    file, then ``--set`` style ``overrides`` (``"mcts.max_steps=8"``), then dotted ``changes`` from code
    (``**{"mcts.max_steps": 8}``)."""
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
