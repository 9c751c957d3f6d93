"""The corpus teaching command: training sides of several corpora (and stdlib transitions) pooled, taught with
the one tactic-teaching function, the model loadable as a search policy; bad input is one line."""

import json

from proofrl.data.corpus_teach import main


def _transition(theorem: str, state: str, tactic: str) -> dict:
    return {
        "theorem": theorem,
        "step": 0,
        "state_before": state,
        "tactic": tactic,
        "state_after": "no goals",
        "goals_before": 1,
        "goals_after": 0,
        "structural": False,
        "premises": [],
    }


def _corpus(root, name: str, train: list[dict], test: list[dict]):
    d = root / name / "splits" / "novel_premises"
    d.mkdir(parents=True)
    (d / "train.jsonl").write_text("".join(json.dumps(t) + "\n" for t in train))
    (d / "test.jsonl").write_text("".join(json.dumps(t) + "\n" for t in test))
    return root / name


def test_teach_pools_training_sides_only(tmp_path):
    a = _corpus(
        tmp_path,
        "liba",
        [_transition("a.x", "n : nat\n⊢ n + 0 = n", "by rewrite addn0.")] * 3,
        [_transition("a.held", "⊢ HELD_OUT_STATE", "held_out_tactic.")],
    )
    b = _corpus(tmp_path, "libb", [_transition("b.y", "⊢ True", "done.")] * 2, [])
    stdlib = tmp_path / "train.jsonl"
    stdlib.write_text(json.dumps(_transition("Coq.z", "⊢ 0 = 0", "reflexivity.")) + "\n")
    out = tmp_path / "model"
    assert (
        main(["--corpora", f"{a},{b}", "--stdlib", str(stdlib), "--out", str(out), "--hidden", "16", "--epochs", "1"])
        == 0
    )
    report = json.loads((out / "teach.json").read_text())
    assert report["sources"] == {"liba": 3, "libb": 2, "stdlib": 1}
    assert report["pairs"] == 6 and report["model"]["hidden"] == 16
    assert report["cpu_seconds"] > 0 and len(report["loadavg_before"]) == 3
    config = json.loads((out / "config.json").read_text())
    assert config["hidden_size"] == 16

    from proofrl.policy.tactic import make_tactic_policy

    proposals = make_tactic_policy(f"hf:{out}").propose("⊢ True", 2)
    assert proposals and all(isinstance(p.tactic, str) for p in proposals)


def test_max_pairs_draws_a_seeded_sample(tmp_path):
    a = _corpus(tmp_path, "liba", [_transition(f"a.x{i}", f"⊢ P{i}", f"apply H{i}.") for i in range(10)], [])
    out = tmp_path / "model"
    assert main(["--corpora", str(a), "--out", str(out), "--hidden", "16", "--max-pairs", "4"]) == 0
    report = json.loads((out / "teach.json").read_text())
    assert report["sources"] == {"liba": 10} and report["pairs"] == 4


def test_missing_corpus_is_one_line(tmp_path, capsys):
    assert main(["--corpora", str(tmp_path / "nothing"), "--out", str(tmp_path / "m")]) == 2
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "no novel_premises training transitions" in out
    assert not (tmp_path / "m").exists()


def test_teaching_with_retrieval_reads_only_the_training_side(tmp_path):
    """``--retrieval``: the context comes from the training transitions and the training lemmas' statements; a
    held-out lemma's name or tactic is in no prompt, and the model says it was taught with context."""
    from proofrl.data.corpus_teach import gather, training_retriever
    from proofrl.policy.retrieval import taught_shape
    from proofrl.policy.tactic import tactic_pairs

    a = _corpus(
        tmp_path,
        "liba",
        [
            _transition("a.x", "n : nat\n⊢ n + 0 = n", "by rewrite addn0."),
            _transition("a.y", "n : nat\n⊢ n = n", "done."),
        ],
        [_transition("a.held", "n : nat\n⊢ n + 0 = n", "held_out_tactic.")],
    )
    split = a / "splits" / "novel_premises"
    (split / "problems-train.jsonl").write_text(
        json.dumps({"name": "a.x", "module": "a", "formal_statement": "n + 0 = n"}) + "\n"
    )
    (split / "problems-test.jsonl").write_text(
        json.dumps({"name": "a.held", "module": "a", "formal_statement": "n + 0 = n"}) + "\n"
    )
    transitions, _ = gather([a])
    prompts = " ".join(p for p, _ in tactic_pairs(transitions, retriever=training_retriever(transitions, [a])))
    assert "done." in prompts and "a.x" in prompts  # a.y's context holds a.x's tactic and name
    assert "held_out_tactic" not in prompts and "a.held" not in prompts
    out = tmp_path / "model"
    assert main(["--corpora", str(a), "--out", str(out), "--hidden", "16", "--epochs", "1", "--retrieval"]) == 0
    assert json.loads((out / "teach.json").read_text())["retrieval"] is True and taught_shape(out) is not None
