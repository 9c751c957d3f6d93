"""proofrl's Ray workers on Ray's own multi-node test cluster (``tests/ray_cluster_support.py``: three worker
raylets of one CPU each with their own resources, on this machine), with real Coq. A node is removed mid-run
(its raylet and its workers killed, as when a machine dies) and the work must still be answered, once."""

import functools
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import NAT, programs_except, requires_coq

from proofrl.problems import Problem, load_problems
from proofrl.provers.base import Status

ray = pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[distributed]")')

from ray_cluster_support import start_cluster, stop_cluster  # noqa: E402  (imports ray: after the skip)

pytestmark = requires_coq


@pytest.fixture(scope="module")
def cluster():
    sim = start_cluster(3)
    yield sim
    stop_cluster(sim)


# -- search over three nodes ---------------------------------------------------------------------------------
PROBLEMS = [
    {"name": "t_true", "header": "", "formal_statement": "Theorem t_true : True."},
    {"name": "t_bad", "header": "", "formal_statement": "Theorem t_bad : undefined_thing."},
    {"name": "t_false", "header": "", "formal_statement": "Theorem t_false : 1 = 2."},
    {"name": "n_add0", "header": NAT, "formal_statement": "Theorem n_add0 (n : nat) : n + 0 = n."},
    {"name": "n_lt", "header": NAT, "formal_statement": "Theorem n_lt (n : nat) : n < S n."},
    {"name": "n_wrong", "header": NAT, "formal_statement": "Theorem n_wrong (n : nat) : n + 1 = n."},
    {
        "name": "b_negb",
        "header": "Require Import Bool.",
        "formal_statement": "Theorem b_negb (b : bool) : negb (negb b) = b.",
    },
    {
        "name": "b_or",
        "header": "Require Import Bool.",
        "formal_statement": "Theorem b_or (b : bool) : orb b true = true.",
    },
    {"name": "b_wrong", "header": "Require Import Bool.", "formal_statement": "Theorem b_wrong (b : bool) : b = true."},
]
TABLE = [
    ("negb", ["destruct b; reflexivity."]),
    ("|| true", ["destruct b; reflexivity."]),
    ("True", ["exact I."]),
    ("n + 0", ["intros; lia."]),
    ("< S", ["intros; lia."]),
    ("1 = 2", ["reflexivity."]),
    ("n + 1", ["lia."]),
    ("b = true", ["reflexivity."]),
]
EXPECTED = {
    "t_true": "proved",
    "t_bad": "error",
    "t_false": "failed",
    "n_add0": "proved",
    "n_lt": "proved",
    "n_wrong": "failed",
    "b_negb": "proved",
    "b_or": "proved",
    "b_wrong": "failed",
}


def mark_node(folder: str, delay: float, state_text: str, calls: int) -> None:
    """The scripted policy's hook on a search worker: note the worker's node, then think for ``delay`` s."""
    Path(folder, ray.get_runtime_context().get_node_id()).touch()
    time.sleep(delay)


def policy(marks: Path, delay: float):
    from search_support import ScriptedPolicy

    return ScriptedPolicy(TABLE, hook=functools.partial(mark_node, str(marks), delay))


def lines(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]


def test_search_over_three_nodes_loses_one_mid_run_and_gives_every_theorem_one_line(cluster, tmp_path, capsys):
    from proofrl.distributed.search import cli_search_ray
    from proofrl.search.run import cli_search

    cluster.ensure(3)
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    probs = load_problems(tmp_path / "p.jsonl")
    kw = {"width": 2, "expansions": 3}
    one = cli_search(
        probs,
        "best-first",
        "scripted",
        None,
        tmp_path / "one",
        workers=1,
        progress=False,
        policy_obj=policy(tmp_path, 0.0),
        **kw,
    )
    assert {x["name"]: x["status"] for x in lines(tmp_path / "one")} == EXPECTED
    capsys.readouterr()

    marks = tmp_path / "marks"
    marks.mkdir()
    victim = cluster.nodes[1]

    def remove_when_busy():  # the victim's worker is inside a chunk (its policy was asked): kill the node
        while not (marks / victim.node_id).exists():
            time.sleep(0.05)
        cluster.remove(victim)

    killer = threading.Thread(target=remove_when_busy, daemon=True)
    killer.start()
    summary = cli_search_ray(
        "auto", probs, "best-first", "scripted", None, tmp_path / "ray", workers=3, policy_obj=policy(marks, 0.4), **kw
    )
    killer.join(timeout=60)
    err = capsys.readouterr().err

    got = lines(tmp_path / "ray")
    assert sorted(x["name"] for x in got) == sorted(EXPECTED)  # each theorem exactly one line
    assert (
        {x["name"]: x["status"] for x in got} == EXPECTED == {x["name"]: x["status"] for x in lines(tmp_path / "one")}
    )
    assert summary["status"] == one["status"]
    trees = sorted(p.name for p in (tmp_path / "ray" / "trees").iterdir())
    assert trees == sorted(p.name for p in (tmp_path / "one" / "trees").iterdir())  # no "-r2" copy of a tree
    assert len({p.read_text() for p in (tmp_path / "ray" / "trees").iterdir()}) == len(trees)
    searches = [
        e["theorem"]
        for e in map(json.loads, (tmp_path / "ray" / "trace.jsonl").read_text().splitlines())
        if e["name"] == "search"
    ]
    assert sorted(searches) == sorted(EXPECTED)  # the lost chunk's trace was not kept, the re-run's was
    assert summary["rerun"] and all("worker was lost" in r["why"] for r in summary["rerun"])
    for r in summary["rerun"]:  # the output names each re-run chunk and its theorems
        assert f"chunk {r['chunk']}/" in err and ", ".join(r["theorems"]) in err and "re-run" in err
    assert json.loads((tmp_path / "ray" / "summary.json").read_text())["rerun"] == summary["rerun"]


# -- verification actors, one per node -----------------------------------------------------------------------
P = Problem("t", "Theorem t : forall n : nat, n + 0 = n.", NAT)
Q = Problem("u", "Theorem u (b : bool) : negb (negb b) = b.", "Require Import Bool.")
GOOD, BAD = "Proof. intros. lia. Qed.", "Proof. intros. reflexivity. Qed."
SLOW_GOOD = "Proof. do 30000 (assert True by exact I; clear H). intros. lia. Qed."  # about 2 s
BATCH = [
    (P, SLOW_GOOD),
    (P, GOOD),
    (P, BAD),
    (P, "Proof. intros. admit. Qed."),
    (P, None),
    (Q, SLOW_GOOD.replace("intros. lia.", "destruct b; reflexivity.")),
    (Q, "Proof. destruct b; reflexivity. Qed."),
    (Q, BAD),
    (Q, "Proof. exact I. Qed."),
]
BATCH_STATUS = [
    Status.VALID,
    Status.VALID,
    Status.ERROR,
    Status.REJECTED,
    Status.REJECTED,
    Status.VALID,
    Status.VALID,
    Status.ERROR,
    Status.ERROR,
]


def test_verifiers_answer_every_item_when_a_node_is_removed_mid_batch(cluster):
    import asyncio

    from proofrl.distributed.verification import averify_across_nodes, verifier

    cluster.ensure(3)
    first, victim, spare = (n.node_id for n in cluster.coq_nodes()[:3])
    name = "t-cluster-verifier"

    def remove_when_busy():  # the victim's actor has a Coq process working on its share
        actor = verifier(name, node_id=victim)
        while not ray.get(actor.prover_pids.remote()):
            time.sleep(0.05)
        time.sleep(0.5)
        cluster.remove(next(n for n in cluster.nodes if n.node_id == victim))

    killer = threading.Thread(target=remove_when_busy, daemon=True)
    killer.start()
    moves: list[dict] = []
    verdicts = asyncio.run(averify_across_nodes(BATCH, actor_name=name, nodes=[first, victim], moves=moves))
    killer.join(timeout=60)
    assert [v.status for v in verdicts] == BATCH_STATUS
    assert [(m["from"], m["to"]) for m in moves] == [(victim, spare)]  # the survivor given the fewest items: the spare
    assert moves[0]["why"].startswith("node lost")
    assert ray.get(verifier(name, node_id=spare).node.remote()) == spare  # the actor started there, and is alive
    assert ray.get(verifier(name, node_id=spare).stats.remote())["coq"]["verdicts"]  # and judged the moved share


@pytest.fixture(scope="module")
def no_coq_node(cluster, tmp_path_factory):
    """A fourth worker node whose PATH has no Coq (its raylet and workers cannot start coqidetop)."""
    path = str(programs_except(("coq",), tmp_path_factory.mktemp("bin-without-coq")))
    node = cluster.add(path=path)
    yield node
    if node in cluster.nodes:
        cluster.remove(node)


def test_a_node_without_coq_says_so_in_one_line_and_its_chunks_go_elsewhere(cluster, no_coq_node, tmp_path, capsys):
    from proofrl.distributed.search import cli_search_ray

    cluster.ensure(3)
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    probs = load_problems(tmp_path / "p.jsonl")
    summary = cli_search_ray(
        "auto",
        probs,
        "best-first",
        "scripted",
        None,
        tmp_path / "ray",
        workers=4,
        width=2,
        expansions=3,
        policy_obj=policy(tmp_path, 0.0),
    )
    err = capsys.readouterr().err.splitlines()
    said = [x for x in err if "cannot run the prover" in x]
    assert (
        len(said) == 1
        and no_coq_node.node_id[:12] in said[0]
        and "coqidetop not found" in said[0]
        and "its chunks go to other nodes" in said[0]
    ), err
    assert {x["name"]: x["status"] for x in lines(tmp_path / "ray")} == EXPECTED
    assert summary["theorems"] == len(EXPECTED) and not summary["rerun"]


def test_a_verifier_node_without_coq_says_so_and_its_items_go_elsewhere(cluster, no_coq_node, capfd):
    import asyncio

    from proofrl.distributed.verification import averify_across_nodes

    cluster.ensure(3)
    moves: list[dict] = []
    verdicts = asyncio.run(
        averify_across_nodes(
            BATCH[1:5] + BATCH[6:],
            actor_name="t-nocoq-verifier",
            nodes=[no_coq_node.node_id, cluster.coq_nodes()[0].node_id],
            moves=moves,
        )
    )
    assert [v.status for v in verdicts] == BATCH_STATUS[1:5] + BATCH_STATUS[6:]
    assert len(moves) == 1 and moves[0]["from"] == no_coq_node.node_id and "coqidetop not found" in moves[0]["why"]
    said = [x for x in capfd.readouterr().err.splitlines() if "moved from node" in x]
    assert len(said) == 1 and "coqidetop not found" in said[0]


# -- bad input -----------------------------------------------------------------------------------------------
def test_a_ray_address_that_does_not_answer_is_one_line_naming_it(tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "p.jsonl").write_text(json.dumps(PROBLEMS[0]) + "\n")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "proofrl.cli",
            "search",
            str(tmp_path / "p.jsonl"),
            "--policy",
            "openai:http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--ray",
            f"127.0.0.1:{port}",
            "--out",
            str(tmp_path / "out"),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert (
        r.stderr.strip() == f"proofrl search: --ray 127.0.0.1:{port}: no Ray cluster answers there (Connection refused)"
    )
