"""The same seed gives the same numbers: a search's samples do not depend on how many Coq workers ran beside
it, and seeds derived from text are the same in every process."""

import os
import subprocess
import sys

import pytest
from conftest import requires_coq

from proofrl.policy.tactic import HFTacticPolicy, call_seed, sampling_stream, train_tiny_tactic_model

TRANSITIONS = [
    {"state_before": "⊢ True", "tactic": "exact I.", "structural": False},
    {"state_before": "b : bool\n⊢ negb (negb b) = b", "tactic": "destruct b; reflexivity.", "structural": False},
    {"state_before": "n : nat\n⊢ n + 0 = n", "tactic": "induction n; simpl; auto.", "structural": False},
]
PROBLEMS = [
    {"name": f"t{i}", "header": "", "formal_statement": f"Theorem t{i} (b : bool) (n : nat) : {goal}."}
    for i, goal in enumerate(["negb (negb b) = b", "n + 0 = n", "True", "b = b", "andb b true = b", "0 + n = n"])
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A barely taught tiny model: its samples are varied, so any change of seed shows in the tactics tried."""
    out = tmp_path_factory.mktemp("tactic-model")
    train_tiny_tactic_model(
        TRANSITIONS,
        out,
        epochs=40,
        seed=0,
        lr=3e-3,
        batch=2,
        model={"hidden": 32, "layers": 1, "heads": 2, "vocab_size": 300},
    )
    return out


def tried(out_dir) -> dict[str, list]:
    """Per theorem: status, proof and every tactic the search tried, in order (its samples)."""
    import json

    rows = {}
    for line in (out_dir / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        tree = json.loads((out_dir / r["tree"]).read_text())
        rows[r["name"]] = [r["status"], r["proof"], r["expansions"], [e["tactic"] for e in tree["edges"]]]
    return rows


@requires_coq
@pytest.mark.parametrize("algorithm", ["best-first", "mcts"])
def test_a_search_samples_the_same_with_one_or_two_workers(tmp_path, model_dir, algorithm):
    from proofrl.policy.tactic import make_tactic_policy
    from proofrl.search.run import search_many

    budgets = {
        "max_steps": 3,
        "width": 8,
        "seconds": None,
    }
    runs = {}
    for workers in (1, 2):
        policy = make_tactic_policy(f"hf:{model_dir}", seed=7, max_tokens=48)
        search_many(
            PROBLEMS, policy, algorithm, budgets, out_dir=tmp_path / str(workers), workers=workers, progress=False
        )
        runs[workers] = tried(tmp_path / str(workers))
    assert set(runs[1]) == {p["name"] for p in PROBLEMS}
    assert sum(len(r[3]) for r in runs[1].values()) > len(PROBLEMS)  # the searches did sample
    assert runs[1] == runs[2]


def test_a_stream_samples_the_same_whatever_was_sampled_before(model_dir):
    from proofrl.policy.model import load_policy

    m, tok = load_policy(model_dir, device="cpu")
    state = "n : nat\n⊢ n + 0 = n"

    def sample(policy):
        with sampling_stream("theorem A"):
            return [p.tactic for p in policy.propose(state, 6)] + [p.tactic for p in policy.propose(state, 6)]

    fresh = HFTacticPolicy(m, tok, seed=3, max_tokens=48)
    busy = HFTacticPolicy(m, tok, seed=3, max_tokens=48)
    with sampling_stream("theorem B"):
        busy.propose("⊢ True", 6)
    busy.propose("⊢ True", 6)  # outside any stream: the policy's own counter
    assert sample(fresh) == sample(busy)


def test_call_seed_is_the_same_in_every_process():
    code = (
        "from proofrl.policy.tactic import call_seed; print(call_seed(5, 'Nat.add_0_r\\x00\\x00Theorem x : True.', 3))"
    )
    seen = set()
    for hash_seed in ("1", "2", "random"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        seen.add(
            subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        )
    assert len(seen) == 1
    assert int(seen.pop()) == call_seed(5, "Nat.add_0_r\x00\x00Theorem x : True.", 3)
    assert 0 <= call_seed(0, "", 0) < 2**31
