"""The backend object: a third prover is one Backend subclass plus one registration, and everything above
``provers/`` finds it by name; the one goal count G(s) that the step reward, the transitions, EVA's labels and
the search's leaf value share."""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar

import pytest

from proofrl.errors import ConfigError
from proofrl.preflight import require_backend
from proofrl.problems import Problem
from proofrl.provers import backend as backends
from proofrl.provers.backend import Backend, backend_names, get_backend, goal_count, guess_backend, register_backend
from proofrl.provers.base import Goal, ProofState, StepResult, Theorem
from proofrl.provers.factory import make_pool
from proofrl.provers.pool import PoolConfig, ProverPool
from proofrl.rewards.format import strip_comments
from proofrl.rewards.subgoal import softplus, subgoal_reward
from proofrl.search.tree import normalize_tactic, refusal


class Toy(Backend):
    """A made-up proof language: ``toy theorem`` statements, ``#`` line comments, tactics ending in ``;``."""

    name = "toy"
    fence = "toy"
    block_comment = ("{-", "-}")
    line_comment = "#"
    install_hint = "nothing to install"
    statement = re.compile(r"^\s*toy theorem\b")
    header = re.compile(r"(?m)^\s*use\b")
    factory_calls: ClassVar[list[dict[str, Any]]] = []  # every instance's calls, read by the tests

    def require(self) -> None:
        return None

    def prover_factory(self, **options: Any):  # the registration surface only: never started
        self.factory_calls.append(options)
        return lambda header: None

    def normalize_tactic(self, tactic: str) -> str:
        t = super().normalize_tactic(tactic)
        return t if t.endswith(";") else t + ";"

    def refusal(self, tactic: str) -> str | None:
        return super().refusal(tactic) or ("forbidden: cheat" if "cheat" in tactic else None)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(backends, "BACKENDS", dict(backends.BACKENDS))  # the registration ends with the test
    register_backend("toy", f"{__name__}:Toy")
    yield get_backend("toy")


def test_a_third_backend_is_one_class_and_one_registration(toy):
    assert backend_names() == ["coq", "lean", "toy"] and isinstance(toy, Toy)
    require_backend("toy")  # preflight asks the backend
    assert guess_backend("use Std", "toy theorem t : 1 = 1") == "toy"  # the loaders tell it from its statement
    p = Problem.from_json({"name": "t", "formal_statement": "toy theorem t : 1 = 1", "header": "use Std"})
    assert p.backend == "toy"
    assert strip_comments("a {- b {- c -} -} d # e\nf", "toy") == "a  d \nf"  # the format reward's comment syntax
    assert normalize_tactic("step   one", "toy") == "step one;" and refusal("cheat;", "toy") == "forbidden: cheat"
    with make_pool("toy", pool=PoolConfig(workers=1), depth=3) as pool:  # the one pool builder
        assert isinstance(pool, ProverPool)
    assert Toy.factory_calls[-1] == {"depth": 3}


def test_an_unknown_backend_is_one_line(toy):
    with pytest.raises(ConfigError, match=r"unknown backend 'hol'; choose one of \['coq', 'lean', 'toy'\]"):
        get_backend("hol")
    with pytest.raises(ConfigError, match="backend must be one of"):
        require_backend("hol")
    with pytest.raises(ValueError, match="already registered"):
        register_backend("toy", "elsewhere:Toy")


def test_the_builtin_backends_own_their_syntax():
    coq, lean = get_backend("coq"), get_backend("lean")
    assert (coq.fence, lean.fence) == ("coq", "lean4")
    assert coq.focus_tactic(2) == "2: {" and lean.focus_tactic(2) == "focus_goal 2"
    assert coq.and_node_lines([["a."], ["b.", "c."]]) == ["{", "a.", "}", "{", "b.", "c.", "}"]
    assert lean.and_node_lines([["a"], ["b"]]) == ["· a", "· b"]
    assert coq.search_options(3.0) == {"step_timeout": 3.0} and lean.search_options(3.0) == {}


TH = Theorem("t", "Theorem t : True.", "")


def _state(fg: int, background: int = 0, shelved: int = 0, given_up: int = 0) -> ProofState:
    return ProofState(TH, (), tuple(Goal((), f"P{i}") for i in range(fg)), background, shelved, given_up)


def test_one_goal_count_every_list_given_up_included():
    """G(s) (LeanListener's "number of sub-goals"): every goal still owed. The step reward is softplus of its
    drop, so hiding a goal in any list (unfocused, shelved, given up) earns no progress."""
    s = _state(1, background=2, shelved=1, given_up=1)
    assert goal_count(s) == s.goal_count == 5
    for hidden in (_state(1, background=1), _state(1, shelved=1), _state(1, given_up=1)):
        assert goal_count(hidden) == goal_count(_state(2)) == 2
        assert subgoal_reward(_state(2), StepResult("t.", hidden)) == pytest.approx(math.log(2)) == softplus(0.0)


def test_the_search_leaf_value_is_minus_the_goal_count_of_the_goal_a_node_owes():
    """``value: goals``: −G(s); inside a focus block the goals behind the node are its siblings' to prove."""
    from proofrl.search.config import SearchConfig
    from proofrl.search.mcts import MCTS
    from proofrl.search.tree import Node

    search = MCTS(None, None, SearchConfig(algorithm="mcts", value="goals"))  # type: ignore[arg-type]
    top = Node(0, _state(2, shelved=1, given_up=1))
    assert search.leaf_value(top) == -4.0 == -goal_count(top.state)
    focused = Node(1, _state(1, background=3, shelved=1), focus_depth=1)
    assert search.leaf_value(focused) == -2.0  # its goal and the shelved one; not the 3 siblings behind it


def test_no_backend_name_is_compared_outside_provers():
    """Above ``provers/`` the backend is asked (``get_backend(name).…``), never branched on by name."""
    from pathlib import Path

    import proofrl

    root = Path(proofrl.__file__).parent
    compare = re.compile(r"""(?:[=!]=|\bin)\s*\(?\s*["'](?:coq|lean)["']|["'](?:coq|lean)["']\s*(?:if\b|[=!]=)""")
    found = [
        f"{p.relative_to(root)}:{i}: {line.strip()}"
        for p in sorted(root.rglob("*.py"))
        if "provers" not in p.parts
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if compare.search(line)
    ]
    assert not found, found
