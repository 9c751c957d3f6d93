"""proofrl's workers on a real local Ray cluster (2 CPUs, one per module) with real Coq: the shared verification
actor answers every item when a prover is killed mid-batch and when the actor itself dies; the session actor
keeps states and hands out ids; a search spread over Ray workers gives the statuses of a local search."""

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from conftest import NAT, requires_coq

ray = pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[distributed]")')

from proofrl.problems import Problem  # noqa: E402
from proofrl.provers.base import Status, Theorem  # noqa: E402

pytestmark = requires_coq

P = Problem("t", "Theorem t : forall n : nat, n + 0 = n.", NAT)
GOOD, BAD = "Proof. intros. lia. Qed.", "Proof. intros. reflexivity. Qed."
SLOW_GOOD = "Proof. do 30000 (assert True by exact I; clear H). intros. lia. Qed."  # about 2 s
TESTS = Path(__file__).parent


@pytest.fixture(scope="module", autouse=True)
def cluster():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # no token file written for a throwaway local cluster
    path = os.pathsep.join([str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH", "")])
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        namespace="proofrl",
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": path}},
    )  # workers import the tests' scripted policy
    yield
    ray.shutdown()


def kill_when(get_pids, after: float) -> threading.Thread:
    """SIGKILL the first pid ``get_pids()`` reports, ``after`` seconds after it appears."""

    def run():
        while not (pids := get_pids()):
            time.sleep(0.05)
        time.sleep(after)
        os.kill(pids[0], signal.SIGKILL)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


BATCH = [
    (P, SLOW_GOOD),
    (P, GOOD),
    (P, BAD),
    (P, "Proof. intros. admit. Qed."),
    (P, None),
    (Problem("l", "theorem l : True := by", "", "lean"), "trivial"),
]
NAME = "t-verifier"  # one actor for the tests below, in file order: found by name, killed, restarted
EXPECTED = [Status.VALID, Status.VALID, Status.ERROR, Status.REJECTED, Status.REJECTED, Status.ERROR]


def test_verifier_answers_every_item_when_a_prover_is_killed_mid_batch():
    from proofrl.distributed.verification import verifier, verify_on_ray

    actor = verifier(NAME, workers=1, timeout=60)
    killer = kill_when(lambda: ray.get(actor.prover_pids.remote()), after=0.7)
    verdicts = verify_on_ray(BATCH, actor_name=NAME)
    killer.join()
    assert [v.status for v in verdicts] == EXPECTED
    assert verdicts[4].reasons == ("no proof",) and "backend mismatch" in verdicts[5].reasons[0]
    assert ray.get(actor.stats.remote())["coq"]["crashes"] == 1  # the slow proof's process died and was retried


def test_verifier_answers_every_item_when_the_actor_is_restarted():
    from proofrl.distributed.verification import verifier, verify_on_ray

    actor = verifier(NAME)  # the same actor as above, found by name
    first = ray.get(actor.pid.remote())
    killer = kill_when(lambda: ray.get(actor.prover_pids.remote()) and [first], after=0.7)  # the actor's own process
    verdicts = verify_on_ray(BATCH, actor_name=NAME)
    killer.join()
    assert [v.status for v in verdicts] == EXPECTED
    assert ray.get(actor.pid.remote()) != first  # Ray restarted it under the same handle and re-sent the call


def test_an_actor_killed_for_good_is_started_again_by_name_and_every_item_answered():
    from proofrl.distributed.verification import verifier, verify_on_ray

    actor = verifier(NAME)

    def kill_for_good():
        while not ray.get(actor.prover_pids.remote()):
            time.sleep(0.05)
        time.sleep(0.5)
        ray.kill(actor, no_restart=True)

    t = threading.Thread(target=kill_for_good, daemon=True)
    t.start()
    verdicts = verify_on_ray(BATCH, actor_name=NAME)
    t.join()
    assert [v.status for v in verdicts] == EXPECTED


def test_verls_reward_function_scores_through_the_shared_actor_with_header_affinity():
    """proofrl.verl.reward.compute_score with ``via=ray``: concurrent samples of two headers, as verl's reward
    workers send them, are judged by the one actor, whose pool loads each header on few processes."""
    import asyncio

    from proofrl.distributed.verification import verifier
    from proofrl.verl.reward import compute_score

    true = {"name": "u", "header": "", "formal_statement": "Theorem u : True.", "backend": "coq"}
    nat = {"name": "t", "header": NAT, "formal_statement": P.formal_statement, "backend": "coq"}
    samples = [(nat, GOOD), (true, "Proof. exact I. Qed."), (nat, BAD), (true, "Proof. admit. Qed.")] * 4

    async def score_all():
        return await asyncio.gather(
            *(compute_score("coq", text, None, rec, via="ray", ray_actor=NAME) for rec, text in samples)
        )

    before = ray.get(verifier(NAME).stats.remote()).get("coq", {}).get("started", 0)
    got = asyncio.run(score_all())
    assert [(r["score"], r["status"]) for r in got] == [
        (1.0, "valid"),
        (1.0, "valid"),
        (0.0, "error"),
        (0.0, "rejected"),
    ] * 4
    assert ray.get(verifier(NAME).stats.remote())["coq"]["started"] - before <= 4  # not one process per sample


def test_the_verifier_is_one_actor_per_node_found_by_name_from_another_process():
    from proofrl.distributed.verification import stop_verifiers, verifier

    here = ray.get(verifier(NAME).pid.remote())  # started again by the test above

    @ray.remote(num_cpus=0)
    def elsewhere():  # another worker process, as a verl reward worker is
        from proofrl.distributed.verification import verifier, verify_on_ray

        (v,) = verify_on_ray([(P, GOOD)], actor_name=NAME)
        return ray.get(verifier(NAME).pid.remote()), v.status.value

    assert ray.get(elsewhere.remote()) == (here, "valid")
    assert stop_verifiers(NAME) == 1


def test_session_actor_keeps_states_and_callers_hold_ids():
    from proofrl.distributed.sessions import session_actor

    s = session_actor(workers=1)
    th = Theorem("t", "Theorem t : forall n : nat, n + 0 = n.", NAT)
    sid, state = ray.get(s.start.remote(th))
    assert state.handle is None and "n + 0 = n" in str(state)  # what leaves the actor has no process handle
    bad, failed = ray.get(s.step.remote(sid, "reflexivity."))
    assert bad is None and not failed.ok
    mid, _ = ray.get(s.step.remote(sid, "intros n."))  # the start state is still usable after a failed step
    end, r2 = ray.get(s.step.remote(mid, "lia."))
    assert r2.state.solved and ray.get(s.final_check.remote(end)).valid
    assert not ray.get(s.final_check.remote(mid)).valid  # the trusted check, not the state, says valid
    assert ray.get(s.drop.remote([sid, mid, end])) == 0
    with pytest.raises(KeyError, match="unknown proof state id"):
        ray.get(s.step.remote(end, "lia."))
    ray.kill(s)


PROBLEMS = [
    {"name": "t_true", "header": "", "formal_statement": "Theorem t_true : True."},
    {"name": "t_negb", "header": "", "formal_statement": "Theorem t_negb (b : bool) : negb (negb b) = b."},
    {"name": "t_bad", "header": "", "formal_statement": "Theorem t_bad : undefined_thing."},
    {"name": "t_false", "header": "", "formal_statement": "Theorem t_false : 1 = 2."},
]


def test_search_on_ray_gives_the_statuses_and_files_of_a_local_search(tmp_path, capsys):
    from search_support import ScriptedPolicy

    from proofrl.distributed.search import cli_search_ray
    from proofrl.problems import load_problems
    from proofrl.search.run import cli_search

    (tmp_path / "p.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    probs = load_problems(tmp_path / "p.jsonl")
    policy = ScriptedPolicy(
        [("negb", ["destruct b; reflexivity."]), ("True", ["exact I."]), ("1 = 2", ["reflexivity."])]
    )
    kw = {"width": 2, "expansions": 4, "workers": 2, "policy_obj": policy}
    local = cli_search(probs, "best-first", "scripted", None, tmp_path / "local", **kw)
    on_ray = cli_search_ray("local", probs, "best-first", "scripted", None, tmp_path / "ray", **kw)
    status = lambda d: {x["name"]: x["status"] for x in map(json.loads, (d / "results.jsonl").read_text().splitlines())}  # noqa: E731
    assert (
        status(tmp_path / "ray")
        == status(tmp_path / "local")
        == {"t_true": "proved", "t_negb": "proved", "t_bad": "error", "t_false": "failed"}
    )
    assert on_ray["status"] == local["status"] and on_ray["theorems"] == 4
    assert sorted(p.name for p in (tmp_path / "ray" / "trees").iterdir()) == sorted(
        p.name for p in (tmp_path / "local" / "trees").iterdir()
    )
    events = [json.loads(line) for line in (tmp_path / "ray" / "trace.jsonl").read_text().splitlines()]
    assert {e["theorem"] for e in events if e["name"] == "search"} == {p["name"] for p in PROBLEMS}
    assert "proof search" in capsys.readouterr().out  # the run's table, printed by the driver
