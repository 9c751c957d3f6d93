"""Proof search over real Coq: both engines prove, the bad inputs of the issue (cheats, loops, a killed prover,
a statement that does not elaborate, a failing policy, a replay that fails the final check) end as they must."""

from __future__ import annotations

import json
import os
import signal

import pytest
from conftest import NAT, requires_coq
from search_support import ScriptedPolicy

from proofrl.errors import ConfigError
from proofrl.provers.base import Goal, ProofState, Theorem
from proofrl.provers.coq.backend import mentions_evar
from proofrl.search import SearchConfig, load_search_config, refusal, search_one
from proofrl.search.policy import PolicyError
from proofrl.search.run import search_many
from proofrl.search.trace import read_trace, summarize

pytestmark = requires_coq

CONJ = Theorem("conj3", "Theorem conj3 : (1 = 1 /\\ 2 = 2) /\\ forall n : nat, n + 0 = n.", NAT)
PLUS = Theorem("plus0", "Theorem plus0 : forall n : nat, n + 0 = n.", NAT)

# state text -> tactics (first match wins); the first tactic of each is the policy's favourite
CONJ_TABLE = [
    ("/\\ (forall", ["split.", "admit."]),
    ("1 = 1 /\\ 2 = 2", ["split."]),
    ("forall n", ["intros n.", "exact_no_check I."]),
    ("n + 0 = n", ["lia.", "auto."]),
    ("= ", ["reflexivity."]),
]


def mcts(**kw) -> SearchConfig:
    return SearchConfig(**{"algorithm": "mcts", "tactic_timeout": 5.0, "max_steps": 16, **kw})


def bfs(**kw) -> SearchConfig:
    return load_search_config("reprover", **{"tactic_timeout": 5.0, "width": 4, "max_steps": 16, "seconds": 30.0, **kw})


def test_forbidden_tactics_are_refused_before_the_prover():
    for cheat in [
        "admit.",
        "give_up.",
        "Admitted.",
        "Abort.",
        "Abort All.",
        "exact_no_check I.",
        "vm_cast_no_check I.",
        "native_cast_no_check I.",
        "change_no_check True.",
        "Axiom x : False.",
        "Proof.",
        "Qed.",
        "}",
        "{",
        "-",
        "2: {",
        "Unset Guard Checking.",
        "#[local] Axiom x : False.",
        "split; admit.",
        "",
    ]:
        assert refusal(cheat, "coq"), cheat
    for ok in ["intros n.", "lia.", "split; reflexivity.", "exact I.", 'idtac "admit".', "2: reflexivity."]:
        assert refusal(ok, "coq") is None, ok
    for cheat in ["sorry", "admit", "repeat' simp", "exact?", "apply?", "simp?", "simp_all?", "aesop?", "rw?"]:
        assert refusal(cheat, "lean"), cheat
    for ok in ["simp", "refine ⟨?_, ?_⟩", "exact h", "omega"]:
        assert refusal(ok, "lean") is None, ok


def test_config_recipes_and_unknown_keys():
    reap = load_search_config("reap")
    assert (reap.algorithm, reap.width, reap.c_base, reap.c_init, reap.discount) == (
        "mcts",
        6,
        3200,
        0.001,
        0.99,
    )
    assert (reap.prior_temperature, reap.max_nodes, reap.max_steps, reap.tactic_timeout, reap.seconds) == (
        50,
        64,
        64,
        200,
        None,
    )
    bfs_ = load_search_config("bfs-prover")
    assert (bfs_.algorithm, bfs_.priority, bfs_.logprob, bfs_.alpha, bfs_.width, bfs_.max_steps, bfs_.seconds) == (
        "best-first",
        "length_normalized",
        "mean",
        2.0,
        4,
        None,
        600,
    )
    assert bfs_.tactic_timeout == 18
    rep = load_search_config("reprover")
    assert (rep.priority, rep.logprob, rep.width, rep.max_steps, rep.seconds, rep.tactic_timeout) == (
        "cum_logprob",
        "sum",
        64,
        None,
        600,
        10,
    )
    with pytest.raises(ConfigError):
        load_search_config("reap", max_stepz=3)
    with pytest.raises(ConfigError):
        load_search_config("reap", discount=1.5)
    with pytest.raises(ConfigError):
        load_search_config("nope")


@pytest.mark.parametrize("config", [mcts(), bfs()], ids=["mcts", "best-first"])
def test_both_engines_prove_and_the_fresh_coqc_check_agrees(coq, config):
    th = PLUS
    r = search_one(th, coq, ScriptedPolicy([("forall n", ["intros n.", "simpl."]), ("n + 0 = n", ["lia."])]), config)
    assert r.status == "proved", r.reason
    assert r.verdict is not None and r.verdict.valid
    assert r.proof.split() == ["intros", "n.", "lia."]
    # an independent judge: a fresh coqc over the reported proof text
    assert coq.check(th, r.proof).valid


def test_mcts_and_node_gets_focused_children_and_a_block_script(coq):
    r = search_one(CONJ, coq, ScriptedPolicy(CONJ_TABLE), mcts())
    assert r.status == "proved", r.reason
    tree = r.tree_json()
    kinds = [n["kind"] for n in tree["nodes"]]
    assert kinds.count("AND") == 2  # after each split
    focus = [e for e in tree["edges"] if e["kind"] == "focus"]
    assert len(focus) == 4 and all(e["tactic"].endswith(": {") for e in focus)
    assert r.proof.count("{") == 4 and r.proof.count("}") == 4
    assert coq.final_check(CONJ, r.proof.split("\n")).valid
    # refused cheats stay in the tree as failed edges with their failure
    failed = {e["tactic"]: e["failure"] for e in tree["edges"] if e["failure"]}
    assert failed["admit."]["kind"] == "forbidden" and failed["exact_no_check I."]["kind"] == "forbidden"
    # the export carries the search's statistics
    e0 = next(e for e in tree["edges"] if e["tactic"] == "split." and e["src"] == tree["root"])
    assert e0["visits"] >= 1 and {"Q", "U", "score", "c", "prior"} <= set(e0)
    assert tree["nodes"][tree["root"]]["solved"] and tree["search"]["status"] == "proved"


def test_evar_goals_stay_together_in_one_or_node(coq):
    th = Theorem("ex2", "Theorem ex2 : exists n : nat, n = 2 /\\ 2 = n.", NAT)
    pol = ScriptedPolicy([("?n = 2 /\\", ["split."]), ("exists", ["eexists."]), ("= ", ["reflexivity."])])
    r = search_one(th, coq, pol, mcts())
    assert r.status == "proved", r.reason
    tree = r.tree
    two = [n for n in tree.nodes if len(n.state.goals) == 2]
    assert two and all(n.kind == "OR" and mentions_evar(n.state) for n in two)


@pytest.mark.parametrize("config", [mcts(max_steps=6), bfs(max_steps=6)], ids=["mcts", "best-first"])
def test_a_policy_of_cheats_is_refused_and_never_closes_a_node(coq, config):
    cheats = [
        "admit.",
        "give_up.",
        "Admitted.",
        "Abort.",
        "exact_no_check I.",
        "vm_cast_no_check (eq_refl 0).",
        "Axiom cheat : False.",
        "Qed.",
        "Proof.",
        "}",
        "1: {",
        "Unset Guard Checking.",
        "intros; admit.",
    ]
    pol = ScriptedPolicy([], default=cheats)
    r = search_one(PLUS, coq, pol, config.with_overrides(width=20))
    assert r.status == "failed"
    assert len(r.tree.nodes) == 1 and not r.tree.root.solved
    assert len(r.tree.edges) == len(cheats)
    assert all(e.failure is not None and e.failure.kind == "forbidden" for e in r.tree.edges)
    assert r.steps == 0  # the prover never saw one of them


def test_a_looping_tactic_is_a_timeout_edge_and_search_goes_on(coq):
    pol = ScriptedPolicy(
        [("forall n", ["let rec loop := (idtac; loop) in loop.", "intros n."]), ("n + 0 = n", ["lia."])]
    )
    r = search_one(PLUS, coq, pol, mcts(tactic_timeout=1.0))
    assert r.status == "proved", r.reason
    timeouts = [e for e in r.tree.edges if e.failure and e.failure.kind == "timeout"]
    assert len(timeouts) == 1 and "loop" in timeouts[0].tactic


def test_a_proposal_s_own_step_cap_cuts_its_tactic_short_and_a_merge_keeps_the_longer(coq):
    """A menu with ``seconds=1`` gets 1 s for its looping tactic though the search allows 5 a step (Coq's
    ``Timeout`` is whole seconds, so well under 5 s); the same tactic also proposed without a cap runs uncapped."""
    from proofrl.policy.sources import MenuPolicy, MixedPolicy, pool_proposals

    loop = "let rec loop := (idtac; loop) in loop."
    pol = MixedPolicy([MenuPolicy([loop], source="slow", seconds=1.0), MenuPolicy(["intros n; lia."])])
    r = search_one(PLUS, coq, pol, bfs(tactic_timeout=5.0))
    assert r.status == "proved", r.reason
    (timeout,) = [e for e in r.tree.edges if e.failure and e.failure.kind == "timeout"]
    assert timeout.source == "slow" and timeout.seconds < 3.0, timeout.seconds

    capped, free = MenuPolicy([loop], seconds=1.0).propose("", 1), MenuPolicy([loop], source="b").propose("", 1)
    assert [p.seconds for p in pool_proposals([("a", capped), ("b", free)])] == [None]
    assert [p.seconds for p in pool_proposals([("a", capped), ("b", capped)])] == [1.0]
    with pytest.raises(ConfigError, match="positive"):
        MenuPolicy([loop], seconds=0.0)


def test_a_prover_killed_mid_search_is_restarted_and_the_state_re_reached():
    from proofrl.provers.coq import CoqProver

    prover = CoqProver(NAT)
    pids = []

    def kill(text: str, calls: int) -> None:  # kill coqidetop when asked about the state two tactics deep
        if "n + 0 = n" in text and "n : nat" in text and not pids:
            pids.append(prover.pid)
            os.kill(prover.pid, signal.SIGKILL)

    pol = ScriptedPolicy([("forall n", ["intros n."]), ("n + 0 = n", ["lia."])], hook=kill)
    try:
        r = search_one(PLUS, prover, pol, mcts())
        assert pids, "the kill did not happen"
        assert r.status == "proved", r.reason
        assert prover.pid != pids[0]  # a new process, which replayed ``intros n.`` to reach the state
        assert not any(e.failure for e in r.tree.edges)
    finally:
        prover.close()


def test_a_prover_killed_during_a_tactic_is_retried_once():
    import threading

    from proofrl.provers.coq import CoqProver

    prover = CoqProver(NAT)
    slow = "do 1000000 idtac; intros n."

    def kill_soon(text: str, calls: int) -> None:
        if calls == 1:
            pid = prover.pid
            threading.Timer(0.3, os.kill, (pid, signal.SIGKILL)).start()

    pol = ScriptedPolicy([("forall n", [slow]), ("n + 0 = n", ["lia."])], hook=kill_soon)
    try:
        r = search_one(PLUS, prover, pol, mcts(tactic_timeout=20.0))
        assert r.status == "proved", r.reason
        assert r.crashes == 1
    finally:
        prover.close()


def test_a_statement_that_does_not_elaborate_is_an_error_and_others_go_on(tmp_path):
    bad = Theorem("bad", "Theorem bad : forall n : nat, n + undefined_thing = n.", NAT)
    pol = ScriptedPolicy([("forall n", ["intros n."]), ("n + 0 = n", ["lia."])])
    results = search_many([bad, PLUS], pol, "mcts", {"tactic_timeout": 5.0}, tmp_path, workers=1, progress=False)
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    by = {x["name"]: x for x in lines}
    assert by["bad"]["status"] == "error" and "elaborate" in by["bad"]["reason"]
    assert by["plus0"]["status"] == "proved" and by["plus0"]["verdict"]["status"] == "valid"
    assert {r.name for r in results} == {"bad", "plus0"}


def test_a_policy_that_raises_mid_run_stops_with_a_clear_error_and_keeps_results(tmp_path):
    def die(text: str, calls: int) -> None:
        if calls == 3:
            raise ConnectionError("policy endpoint went away")

    pol = ScriptedPolicy([("forall n", ["intros n."]), ("n + 0 = n", ["lia."])], hook=die)
    th2 = Theorem("plus0b", "Theorem plus0b : forall n : nat, n + 0 = n.", NAT)
    th3 = Theorem("plus0c", "Theorem plus0c : forall n : nat, n + 0 = n.", NAT)
    with pytest.raises(PolicyError, match="endpoint went away"):
        search_many([PLUS, th2, th3], pol, "mcts", {"tactic_timeout": 5.0}, tmp_path, workers=1, progress=False)
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [(x["name"], x["status"]) for x in lines] == [("plus0", "proved"), ("plus0b", "error")]
    assert "ConnectionError" in lines[1]["reason"]
    assert (tmp_path / "trees" / "plus0b.json").exists()
    assert not (tmp_path / "trees" / "plus0c.json").exists()


def test_a_proof_that_relies_on_a_header_axiom_is_unsound_not_proved(coq, blind_session):
    header = NAT + "\nAxiom cheat : forall P : Prop, P."
    th = Theorem("hard", "Theorem hard : forall n : nat, n * n = n + 1.", header)
    from proofrl.provers.coq import CoqProver

    prover = CoqProver(header)
    try:
        r = search_one(th, prover, ScriptedPolicy([], default=["apply cheat."]), mcts())
    finally:
        prover.close()
    (leaf,) = [n for n in r.tree.nodes if n.goals_gone]  # no goals in the blinded session ...
    assert r.status == "unsound"  # ... but the fresh coqc check rejects the axiom
    assert "cheat" in leaf.unsound and leaf.dead and not r.tree.root.solved
    assert r.verdict is not None and not r.verdict.valid and any("cheat" in x for x in r.verdict.reasons)


class _MutatingProver:
    """The real Coq prover, except that the final check receives the script without its last sentence (a
    deliberate mutation: the replay then fails the check)."""

    def __init__(self, inner):
        self._inner = inner

    def final_check(self, theorem, tactics, *, timeout=None):
        return self._inner.final_check(theorem, list(tactics)[:-1], timeout=timeout)

    def __getattr__(self, name):
        return getattr(self._inner, name)


@pytest.mark.parametrize("config", [mcts(), bfs()], ids=["mcts", "best-first"])
def test_a_script_whose_replay_fails_the_final_check_is_unsound(coq, config):
    pol = ScriptedPolicy([("forall n", ["intros n."]), ("n + 0 = n", ["lia."])])
    r = search_one(PLUS, _MutatingProver(coq), pol, config)
    assert r.status == "unsound"
    assert r.verdict is not None and not r.verdict.valid
    assert "final check" in r.reason


def test_merging_of_repeated_tactics_equal_states_and_self_loops(coq):
    pol = ScriptedPolicy(
        [("forall n", ["intros n.", "intros  n", "intro n.", "idtac.", "intros m."]), ("n + 0 = n", ["lia."])]
    )
    r = search_one(PLUS, coq, pol, mcts(max_steps=1))
    tree = r.tree
    root_edges = [tree.edges[e] for e in tree.root.children]
    first = next(e for e in root_edges if e.tactic == "intros n.")
    assert "intro n." in first.aliases  # same state by another tactic: prior added
    import math

    p = lambda lp: math.exp(lp / 50)  # noqa: E731
    assert first.prior_raw == pytest.approx(p(-1) + p(-2) + p(-3))  # "intros  n" normalises to "intros n."
    assert any(d["reason"] == "self-loop" and d["tactic"] == "idtac." for d in tree.dropped)
    assert len([e for e in root_edges if e.ok]) == 2  # intros n. and intros m. (another state)


def test_best_first_priorities(coq):
    # ReProver's cumulative log-prob prefers the shallow cheap node; BFS-Prover's normalisation the deep one
    from proofrl.search.best_first import BestFirstSearch

    s = BestFirstSearch(coq, ScriptedPolicy([]), bfs(priority="length_normalized", logprob="sum", alpha=2.0))
    from proofrl.search.tree import Node

    shallow, deep = Node(0, None, depth=1, logprob=-2.0), Node(1, None, depth=3, logprob=-4.0)  # type: ignore[arg-type]
    assert s.priority(deep) > s.priority(shallow)
    s.config = bfs(priority="cum_logprob")
    assert s.priority(shallow) > s.priority(deep)


def test_search_many_writes_results_trees_and_a_trace(tmp_path):
    pol = ScriptedPolicy(CONJ_TABLE)
    search_many(
        [CONJ, PLUS],
        pol,
        "best-first",
        {"tactic_timeout": 5.0, "width": 4, "max_steps": 10},
        tmp_path,
        workers=2,
        progress=True,
    )
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert {x["name"] for x in lines} == {"conj3", "plus0"}
    for x in lines:
        assert set(x) >= {"name", "status", "proof", "verdict", "expansions", "seconds"}
    tree = json.loads((tmp_path / "trees" / "plus0.json").read_text())
    assert tree["search"]["status"] == "proved" and tree["nodes"] and tree["edges"]
    events = read_trace(tmp_path / "trace.jsonl")
    assert {"policy", "tactic", "final_check", "select", "backup", "search"} <= {e["name"] for e in events}
    s = summarize(events)
    assert 0.0 <= s["outside_share"] <= 1.0 and s["search_seconds"] > 0
    assert json.loads((tmp_path / "summary.json").read_text())["theorems"] == 2


def test_mcts_reads_the_value_function_and_a_failing_value_call_is_reaps_minus_1000(coq):
    class Flaky:
        name = "flaky"

        def __init__(self):
            self.calls = 0

        def value(self, state_text: str) -> float:
            self.calls += 1
            if self.calls == 2:
                raise ConnectionError("value endpoint hiccup")
            return -2.0

    from proofrl.search.trace import Tracer

    tracer, vf = Tracer(), Flaky()
    pol = ScriptedPolicy(
        [("forall n", ["intros n.", "intros m."]), ("n + 0 = n", ["simpl.", "lia."]), ("m + 0 = m", ["lia."])]
    )
    r = search_one(PLUS, coq, pol, mcts(), tracer, vf)
    assert r.status == "proved", r.reason
    estimates = [n.estimate for n in r.tree.nodes if n.estimate is not None]
    assert -2.0 in estimates and -1000.0 in estimates
    spans = [e for e in tracer.events if e["name"] == "value"]
    assert len(spans) == vf.calls and any("error" in e["extra"] for e in spans)


def test_cli_search_reads_problems_and_prints_a_summary(tmp_path, capsys):
    from proofrl.search.run import cli_search

    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"name": "plus0", "header": NAT, "formal_statement": PLUS.statement}) + "\n")
    pol = ScriptedPolicy([("forall n", ["intros n."]), ("n + 0 = n", ["lia."])])
    summary = cli_search(
        problems,
        "best-first",
        out=tmp_path / "out",
        expansions=4,
        width=2,
        tactic_timeout=5.0,
        policy_obj=pol,
        progress=False,
    )
    assert summary["proved"] == 1 and summary["theorems"] == 1
    assert "proved" in capsys.readouterr().out
    line = json.loads((tmp_path / "out" / "results.jsonl").read_text())
    assert line["status"] == "proved" and line["expansions"] == 2


def _state(*conclusions: str, background: int = 0) -> ProofState:
    return ProofState(PLUS, (), tuple(Goal((), c) for c in conclusions), background)


def test_mcts_backup_and_puct_follow_reap():
    from proofrl.search.mcts import MCTS
    from proofrl.search.tree import SearchTree

    s = MCTS(None, ScriptedPolicy([]), mcts())  # type: ignore[arg-type]
    tree = s.tree = SearchTree(PLUS, _state("A /\\ B"))
    e = tree.add_child(tree.root, "split.", _state("A", "B"), prior=1.0)
    and_node = tree.nodes[e.dst]
    assert and_node.kind == "AND"
    f1 = tree.add_child(and_node, "1: {", _state("A", background=1), kind="focus", prior=0.5, focus_index=1)
    f2 = tree.add_child(and_node, "2: {", _state("B", background=1), kind="focus", prior=0.5, focus_index=2)
    and_node.evaluations = tree.root.evaluations = 1
    s.backup([e, f1], tree.nodes[f1.dst], -3.0)
    assert (f1.visits, f1.value_sum) == (1, -3.0)  # a focus edge costs 0
    assert (e.visits, e.value_sum) == (1, -4.0)  # the AND node passed the min (-3), the tactic edge cost 1
    assert (tree.root.visits, tree.root.value_sum) == (1, -4.0)
    g = 0.99
    root_scores = s.edge_scores(tree.root)
    assert root_scores[e.id]["Q"] == pytest.approx(g**3)  # γ^(−1 − v̄), v̄ = −4
    and_scores = s.edge_scores(and_node)
    assert and_scores[f1.id]["Q"] == pytest.approx(1 - g**2)
    assert and_scores[f2.id]["Q"] == pytest.approx(1.0)  # the open, unvisited goal looks hardest
    _, leaf = s.select()
    assert leaf.id == f2.dst
    # solved goals get Q = −∞ at an AND node; the AND node is solved once every focus child is
    tree.nodes[f1.dst].solved = True
    assert s.edge_scores(and_node)[f1.id]["Q"] == -float("inf")


def test_progressive_sampling_re_expands_and_adds_priors(coq):
    pol = ScriptedPolicy([("forall n", ["intros n.", "intro n."]), ("n + 0 = n", ["simpl."])])
    cfg = mcts(max_steps=4, progressive_sampling_c=1.0, progressive_sampling_alpha=1.0)
    r = search_one(PLUS, coq, pol, cfg)
    root = r.tree.root
    assert root.evaluations >= 2  # expanded again once evaluations <= c * N^alpha
    import math

    first = r.tree.edges[root.children[0]]
    once = math.exp(-1 / 50) + math.exp(-2 / 50)  # intros n. and intro n. (same state) merged
    assert first.prior_raw == pytest.approx(root.evaluations * once)


def test_search_recipes_are_yaml_files_overridden_like_training_recipes(tmp_path):
    from proofrl.search.config import SEARCH_RECIPES_DIR, search_recipe_names

    assert search_recipe_names() == ["bfs-prover", "reap", "reprover"]
    assert all((SEARCH_RECIPES_DIR / f"{n}.yaml").is_file() for n in search_recipe_names())
    cfg = load_search_config("reap", "c_base=1000", "value=goals")
    assert (cfg.c_base, cfg.value, cfg.width) == (1000, "goals", 6)
    assert load_search_config("reap").with_set(["algorithm=best-first"]).algorithm == "best-first"
    mine = tmp_path / "mine.yaml"
    mine.write_text("algorithm: best-first\nwidth: 3\n")
    assert load_search_config(mine, "seconds=5").seconds == 5
    with pytest.raises(ConfigError) as e:
        load_search_config("reap", "c_bse=1")
    assert "\n" not in str(e.value) and "c_bse" in str(e.value) and "c_base" in str(e.value)
    with pytest.raises(ConfigError) as e:  # a recipe written for the two engine sections: where each key is now
        load_search_config("reap", "mcts.num_samples=3", "best_first.max_expansions=2", "mcts.c_base=9")
    assert str(e.value) == (
        "best_first and mcts: no longer sections, their keys are one level up (best_first.max_expansions is "
        "max_steps; mcts.c_base is c_base; mcts.num_samples is width)"
    )
    mine.write_text("- a list\n")
    with pytest.raises(ConfigError) as e:
        load_search_config(mine)
    assert "mapping" in str(e.value)
