"""verl's Ray-backed reward loop, as a verl run builds it: ``RewardLoopManager`` starts ``reward.num_workers``
``RewardLoopWorker`` actors round-robin over the nodes of a Ray cluster (here two simulated nodes,
``tests/ray_cluster_support.py``), each loads proofrl's reward function by path and judges real Coq proofs
through the verification actor of its own node (``reward_kwargs.via=ray``). Both of verl's paths are run: the
batch one (``compute_rm_score``, the trainer's) and the per-sample one (``compute_score.remote``, what verl's
agent loop calls while it generates)."""

from __future__ import annotations

import pytest
from conftest import requires_coq

ray = pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[distributed]")')

# these import ray or verl: after the skip
from ray_cluster_support import start_cluster, stop_cluster  # noqa: E402
from test_verl_reward import _batch  # noqa: E402
from verl_support import (  # noqa: E402
    ADMITTED,
    RECORD,
    REWARD_PY,
    VALID,
    WRONG,
    compose_verl,
    tiny_model,
)

pytestmark = requires_coq

ACTOR = "t-verl-verifier"


@pytest.fixture(scope="module")
def cluster():
    sim = start_cluster(2)
    yield sim
    from proofrl.distributed.verification import stop_verifiers

    stop_verifiers(ACTOR)
    stop_cluster(sim)


def test_verls_ray_reward_loop_scores_real_coq_proofs_through_each_nodes_verifier(cluster, tmp_path):
    from transformers import AutoTokenizer
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager

    from proofrl.distributed.verification import verifier

    config = compose_verl(
        [
            f"actor_rollout_ref.model.path={tiny_model(tmp_path / 'model')}",
            f"reward.custom_reward_function.path={REWARD_PY}",
            "reward.custom_reward_function.name=compute_score",
            "reward.num_workers=2",
            "+reward.custom_reward_function.reward_kwargs.via=ray",
            f"+reward.custom_reward_function.reward_kwargs.ray_actor={ACTOR}",
            "+reward.custom_reward_function.reward_kwargs.timeout=10",
        ]
    )
    manager = RewardLoopManager(config)
    assert len(manager.reward_loop_workers) == 2
    tok = AutoTokenizer.from_pretrained(tmp_path / "model")
    broken = {"name": "broken"}
    texts = [VALID, WRONG, ADMITTED, VALID, WRONG, VALID, ADMITTED, VALID]
    records = [RECORD] * 7 + [broken]
    data = _batch(tok, texts, records)

    out = manager.compute_rm_score(data)  # verl's batch path: the batch cut in one chunk per worker
    scores = out.batch["rm_scores"].sum(-1).tolist()
    assert scores == [1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    assert list(out.non_tensor_batch["status"]) == [
        "valid",
        "error",
        "rejected",
        "valid",
        "error",
        "valid",
        "rejected",
        "error",
    ]
    assert "formal_statement" in out.non_tensor_batch["reasons"][7]
    assert set(out.meta_info["reward_extra_keys"]) >= {"score", "status", "reasons", "format_ok"}

    # each worker judged its chunk on its own node's verification actor: one actor per node, both used
    nodes = [n.node_id for n in cluster.nodes]
    stats = [ray.get(verifier(ACTOR, node_id=n).stats.remote()) for n in nodes]
    judged = [sum(s["coq"]["verdicts"].values()) for s in stats]
    assert all(j > 0 for j in judged) and sum(judged) == 7, judged  # the broken record needs no prover

    # the per-sample path verl's agent loop takes while it generates (a random worker per sample)
    one = ray.get(manager.reward_loop_workers[1].compute_score.remote(data[0:1]))
    assert one["reward_score"] == 1.0 and one["reward_extra_info"]["status"] == "valid"
    for w in manager.reward_loop_workers:
        ray.kill(w)
