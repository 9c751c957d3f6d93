"""LeanListener's online-against-offline DPO claim: at its smoke size through `proofrl bench` (real Coq, the smoke
tactic assets' tiny model), the arms scored on the same held-out states, the offline run held to the online
run's updates pair for pair; and the helpers it reuses (the recorded tactic at a state, per-step pair counts)."""

from __future__ import annotations

import json

import pytest
from conftest import requires_coq
from typer.testing import CliRunner

from proofrl.cli import app

CLAIM = "leanlistener-online-dpo"


@requires_coq
def test_online_against_offline_dpo_runs_at_smoke_size_on_the_same_states(tmp_path):
    r = CliRunner().invoke(app, ["bench", "--smoke", "--claim", CLAIM, "--seeds", "1", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    (line,) = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert line["claim"] == CLAIM and line["size"] == 2
    arms = line["arms"]
    assert set(arms) == {"SFT", "online DPO", "offline DPO"}
    assert arms["offline DPO"] and all(v.keys() == arms["offline DPO"].keys() for v in arms.values())
    assert all(0.0 <= x <= 1.0 for v in arms.values() for x in v.values())
    tactics = json.loads((tmp_path / CLAIM / "seed-0" / "tactics.json").read_text())
    budget = tactics["budget"]
    online = [n for n in budget["online_pairs_per_update"] if n > 0]
    assert len(budget["online_pairs_per_update"]) == 1  # the smoke size's one update
    assert budget["offline_steps"] == (len(online) if budget["offline_pairs"] else 0)
    assert budget["offline_pairs"] <= sum(online)
    for arm in ("SFT", "online DPO", "offline DPO"):
        assert 0.0 <= tactics[arm]["top_share"] <= 1.0 and 0.0 <= tactics[arm]["zero_precision"] <= 1.0
    summary = json.loads((tmp_path / "summary.json").read_text())["claims"][CLAIM]
    assert summary["arms"] == ["offline DPO", "online DPO"] and summary["theorems"] == len(arms["SFT"])


def test_the_recorded_tactic_at_each_state_is_the_one_its_transition_names():
    from proofrl.rollout.tactics import state_points
    from proofrl.train.offline_dpo import human_tactics

    def rec(theorem, step, tactic, statement="True"):
        return {
            "theorem": theorem,
            "statement": statement,
            "header": "",
            "step": step,
            "state_before": f"{theorem} before {step}",
            "tactic": tactic,
        }

    records = [rec("a", 0, "intros."), rec("a", 1, "lia."), rec("b", 0, "auto."), rec("b", 0, "trivial.", "False")]
    points = state_points(records)
    assert [(p.theorem.name, len(p.path)) for p in points] == [("a", 0), ("a", 1), ("b", 0), ("b", 0)]
    assert human_tactics(records, points) == ["intros.", "lia.", "auto.", "trivial."]  # told apart by statement
    assert human_tactics(records[:1], points[1:2]) == [""]


def test_offline_dpo_takes_the_pairs_per_step_it_is_given(tmp_path):
    """The offline arm matches the online run's updates: ``sizes`` pairs in each step, each pair once."""
    from proofrl.objectives.dpo import Pair
    from proofrl.policy.model import load_policy
    from proofrl.policy.tiny import build_tiny_model
    from proofrl.train.offline_dpo import train_offline_dpo

    build_tiny_model(
        tmp_path, ["[GOAL]\n⊢ True\n[PROOFSTEP]\nexact I. auto. lia."] * 4, hidden=32, layers=1, heads=2, vocab_size=300
    )
    model, tok = load_policy(tmp_path, device="cpu")
    ref = load_policy(tmp_path, device="cpu")[0].eval().requires_grad_(False)
    enc = lambda s: (*tok(s, add_special_tokens=False)["input_ids"], tok.eos_token_id)  # noqa: E731
    prompt = tuple(tok("[GOAL]\n⊢ True\n[PROOFSTEP]\n")["input_ids"])
    pairs = [
        Pair(prompt, enc(good), enc(bad)) for good, bad in [("exact I.", "lia."), ("auto.", "lia."), ("exact I.", "x.")]
    ]
    stats = train_offline_dpo(model, ref, tok, pairs, steps=1, sizes=[1, 2], lr=1e-2, seed=0)
    assert [s.pairs for s in stats] == [1, 2]
    assert [s.pairs for s in train_offline_dpo(model, ref, tok, pairs, steps=2, batch=3, seed=0)] == [3, 3]
    with pytest.raises(ValueError, match="no offline DPO pairs"):
        train_offline_dpo(model, ref, tok, [], steps=1)
