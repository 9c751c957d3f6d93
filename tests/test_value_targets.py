"""Value targets from exported trees (AND/OR), reap's replay filters, the replay buffer and human rehearsal."""

from __future__ import annotations

import random

from proofrl.data.search_samples import ReplayConfig, ReplaySample, human_samples, samples_from_tree
from proofrl.data.value_targets import node_state_text, solution_path, steps_to_close, value_targets
from proofrl.train.replay_buffer import ReplayBuffer, rehearsal_draw


def node(i, goals, *, kind="OR", solved=False, closes=False, evaluations=1, children=(), value=None):
    return {
        "id": i,
        "kind": kind,
        "goals": goals,
        "counts": {"background": 0, "shelved": 0, "given_up": 0},
        "solved": solved,
        "closes": closes,
        "evaluations": evaluations,
        "children": list(children),
        "value": value,
    }


def edge(i, src, dst, tactic, kind="tactic", failure=None):
    return {"id": i, "src": src, "dst": dst, "tactic": tactic, "kind": kind, "failure": failure}


def and_tree():
    """root --split.--> AND(2 goals); goal 1 closes in 1 step, goal 2 in 2 steps; a failed edge and an unsolved
    sibling branch of the root. Steps: root = 1 + max(1, 2) = 3 (min over AND children's values)."""
    nodes = [
        node(0, ["⊢ A /\\ B"], solved=True, children=[0, 1, 2], value=-2.5),
        node(1, ["⊢ A", "⊢ B"], kind="AND", solved=True, children=[3, 4]),
        node(2, ["⊢ A"], solved=True, children=[5]),
        node(3, ["⊢ B"], solved=True, children=[6]),
        node(4, [], solved=True, closes=True, evaluations=0),
        node(5, ["⊢ B'"], solved=True, children=[7]),
        node(6, [], solved=True, closes=True, evaluations=0),
        node(7, ["⊢ C"], children=[8]),  # expanded, unsolved
        node(8, ["⊢ D"], evaluations=0),  # never expanded: no target
    ]
    edges = [
        edge(0, 0, 1, "split."),
        edge(1, 0, None, "bad.", failure={"kind": "error", "message": "x"}),
        edge(2, 0, 7, "left."),
        edge(3, 1, 2, "1: {", "focus"),
        edge(4, 1, 3, "2: {", "focus"),
        edge(5, 2, 4, "auto."),
        edge(6, 3, 5, "simpl."),
        edge(7, 5, 6, "auto."),
        edge(8, 7, 8, "intro."),
    ]
    return {"root": 0, "nodes": nodes, "edges": edges, "solution": [0, 3, 5, 4, 6, 7], "search": {"name": "t"}}


def test_steps_to_close_take_the_hardest_goal_at_and_nodes_and_the_shortest_tactic_at_or_nodes():
    tree = and_tree()
    steps = steps_to_close(tree)
    assert steps == {0: 3, 1: 2, 2: 1, 3: 2, 4: 0, 5: 1, 6: 0}
    # an OR node with two solved children takes the shorter one
    tree["nodes"][7] = node(7, ["⊢ C"], solved=True, children=[8, 9])
    tree["nodes"].append(node(9, [], solved=True, closes=True, evaluations=0))
    tree["edges"].append(edge(9, 7, 9, "trivial."))
    tree["nodes"][7]["children"] = [8, 9]
    assert steps_to_close(tree)[7] == 1 and steps_to_close(tree)[0] == 2


def test_value_targets_are_minus_steps_and_unsolved_nodes_get_none_unless_asked():
    targets = {t.node: t for t in value_targets(and_tree(), num_bins=64)}
    assert targets[0].value == -3 and targets[1].value == -2 and targets[2].value == -1
    assert 4 not in targets and 6 not in targets  # closed: search gives 0 without asking
    assert 7 not in targets  # unsolved: the AlphaProof pseudocode extracts no target from it
    targets = {t.node: t for t in value_targets(and_tree(), num_bins=64, unsolved=True)}
    assert targets[7].value == -63 and not targets[7].solved
    assert 8 not in targets  # never expanded: nothing was learned about it
    assert targets[0].state == "⊢ A /\\ B" and targets[1].state == "⊢ A\n\n⊢ B"


def test_state_text_of_an_exported_node_matches_what_search_passes():
    n = node(0, ["x : nat\n⊢ x = x"])
    n["counts"]["background"] = 2
    assert node_state_text(n) == "x : nat\n⊢ x = x\n\n(+ 2 unfocused, 0 shelved)"


def test_solution_path_lists_tactic_edges_only():
    assert solution_path(and_tree()) == [(0, "split."), (2, "auto."), (3, "simpl."), (5, "auto.")]


def test_replay_samples_and_reaps_filters():
    tree = and_tree()
    samples = samples_from_tree(tree, 1, ReplayConfig(max_proof_steps=16))
    on_path = [(s.state, s.tactic, s.cost) for s in samples if s.tactic]
    assert on_path == [("⊢ A /\\ B", "split.", 3), ("⊢ A", "auto.", 1), ("⊢ B", "simpl.", 2), ("⊢ B'", "auto.", 1)]
    off = {s.state: s.cost for s in samples if s.tactic is None}
    assert off == {"⊢ A\n\n⊢ B": 2}  # closed nodes are left out: search gives them 0 itself; unsolved ones too
    with_unsolved = samples_from_tree(tree, 1, ReplayConfig(unsolved_values=True))
    assert {s.state: s.cost for s in with_unsolved if s.tactic is None} == {"⊢ A\n\n⊢ B": 2, "⊢ C": 63}
    assert not [s for s in samples_from_tree(tree, 1, ReplayConfig(off_path_values=False)) if s.tactic is None]
    assert ReplayConfig(max_proof_steps=2).why_dropped(tree) == "too long"
    assert ReplayConfig(root_value_max=-3.0).why_dropped(tree) == "root value"  # root value −2.5: too easy
    assert ReplayConfig(root_value_min=-2.0).why_dropped(tree) == "root value"
    assert ReplayConfig(root_value_min=-3.0, root_value_max=-2.0).why_dropped(tree) is None
    tree["solution"] = []
    assert ReplayConfig().why_dropped(tree) == "unsolved" and samples_from_tree(tree, 1, ReplayConfig()) == []


def test_buffer_drops_repeats_keeps_the_newest_and_round_trips():
    b = ReplayBuffer(capacity=3)
    s = [ReplaySample(f"s{i}", "auto.", 1.0, "t", 1) for i in range(4)]
    assert b.add(s[:2] + s[:1]) == 2
    assert b.add(s[2:]) == 2 and [x.state for x in b.items] == ["s1", "s2", "s3"]
    c = ReplayBuffer(1)
    c.load_state_dict(b.state_dict())
    assert c.items == b.items and c.capacity == 3


def test_human_rehearsal_targets_are_steps_left_and_the_ratio_holds():
    trans = [
        {
            "theorem": "t",
            "module": "M",
            "step": i,
            "state_before": f"s{i}",
            "tactic": tac,
            "structural": tac == "-",
            "goals_before": 1,
            "goals_after": 0 if tac == "auto." else 1,
        }
        for i, tac in enumerate(["intros.", "-", "split.", "auto."])
    ]
    hs = human_samples(trans)
    assert [(h.state, h.tactic, h.cost, h.source) for h in hs] == [
        ("s0", "intros.", 3, "human"),
        ("s2", "split.", 2, "human"),
        ("s3", "auto.", 1, "human"),
    ]
    many = [ReplaySample(f"h{i}", "t.", 1.0, "h", -1, "human") for i in range(100)]
    assert len(rehearsal_draw(many, 30, 0.25, random.Random(0))) == 10  # 10 of 40 = 25 %
    assert len(rehearsal_draw(many, 30, 0.5, random.Random(0))) == 30
    assert rehearsal_draw(many, 0, 0.5, random.Random(0)) == []


def _split_proof():
    """``split. - intros. simpl. lia. - intros. simpl. lia.``: 7 tactics, critical path 1 + max(3, 3) = 4."""
    hidden = "\n\n(+ 1 unfocused, 0 shelved)"
    rows = [
        ("split.", 1, 2, "⊢ P /\\ Q"),
        ("-", 2, 2, "⊢ P\n\n⊢ Q"),
        ("intros.", 2, 2, "⊢ P" + hidden),
        ("simpl.", 2, 2, "⊢ P1" + hidden),
        ("lia.", 2, 1, "⊢ P2" + hidden),
        ("-", 1, 1, "⊢ Q"),
        ("intros.", 1, 1, "⊢ Q"),
        ("simpl.", 1, 1, "⊢ Q1"),
        ("lia.", 1, 0, "⊢ Q2"),
    ]
    return [
        {
            "theorem": "t",
            "module": "M",
            "step": i,
            "state_before": st,
            "tactic": tac,
            "structural": tac == "-",
            "goals_before": b,
            "goals_after": a,
        }
        for i, (tac, b, a, st) in enumerate(rows)
    ]


def test_human_rehearsal_targets_are_in_the_unit_of_search_targets():
    """The same proof shape as a search tree and as human transitions gives the same steps to close (the
    critical path at the split, 4), not every tactic left (7)."""
    nodes = [
        node(0, ["⊢ P /\\ Q"], solved=True, children=[0]),
        node(1, ["⊢ P", "⊢ Q"], kind="AND", solved=True, children=[1, 2]),
    ]
    edges = [edge(0, 0, 1, "split."), edge(1, 1, 2, "1: {", "focus"), edge(2, 1, 6, "2: {", "focus")]
    for first in (2, 6):  # each goal: three tactic steps, the last one closes it
        for k in range(3):
            nodes.append(node(first + k, [f"g{first + k}"], solved=True, children=[len(edges)]))
            edges.append(edge(len(edges), first + k, first + k + 1, ["intros.", "simpl.", "lia."][k]))
        nodes.append(node(first + 3, [], solved=True, closes=True, evaluations=0))
    tree = {"root": 0, "nodes": sorted(nodes, key=lambda n: n["id"]), "edges": edges}
    search = steps_to_close(tree)
    human = {h.state: h.cost for h in human_samples(_split_proof())}
    assert search[0] == 4 and human["⊢ P /\\ Q"] == search[0]
    assert human["⊢ P" + "\n\n(+ 1 unfocused, 0 shelved)"] == search[2] == 3  # inside a bullet: the focused goal alone
    assert human["⊢ Q2"] == search[8] == 1
