"""Proof search over prover states: best-first (ReProver, BFS-Prover) and AND-OR MCTS (reap), with replay and
a final check in a fresh process, tree export and a wall-clock trace (docs/search.md)."""

from .best_first import BestFirstSearch
from .config import SearchConfig, load_search_config
from .engine import Search, SearchResult
from .mcts import MCTS
from .policy import PolicyError, Proposal, TacticPolicy
from .run import cli_search, search_many, search_one
from .tree import SearchTree, refusal

__all__ = [
    "MCTS",
    "BestFirstSearch",
    "PolicyError",
    "Proposal",
    "Search",
    "SearchConfig",
    "SearchResult",
    "SearchTree",
    "TacticPolicy",
    "cli_search",
    "load_search_config",
    "refusal",
    "search_many",
    "search_one",
]
