"""EVA: the expected score over anchor logits, exact score-token indexing, the loss and its gradient, parsing
of generated outputs, the recipe and the commands. Real tokenizers (built here with ``tokenizers``), a real
tiny Llama, real PyTorch."""

from __future__ import annotations

import json
import math

import pytest
import torch
from typer.testing import CliRunner

from proofrl.cli import app
from proofrl.errors import ConfigError
from proofrl.eval.rm import metrics, pearson
from proofrl.rewards.combine import STEP_REWARDS
from proofrl.rewards.eva import (
    EvaScorer,
    ScorePositionError,
    anchor_token_ids,
    combined_score,
    expected_score,
    gather_positions,
    parse_scores,
    render_target,
    score_key,
    score_token_positions,
    to_value,
)
from proofrl.train.eva import (
    Example,
    Record,
    build_examples,
    collate,
    eva_loss,
    eva_term,
    load_config,
    parse_record,
    read_records,
    train_eva,
)

torch.set_num_threads(2)
KEYS = [score_key(d) for d in ("logic", "align", "clarity")]


def _records(n: int = 8) -> list[Record]:
    out = []
    for i in range(n):
        # a proposal Coq accepts scores high, one it rejects low (learnable from the critique before the scores)
        s = (
            {"logic": 4.6, "align": 4.2, "clarity": 4.8}
            if i % 2
            else {"logic": 1.4 + 0.1 * (i % 3), "align": 1.8, "clarity": 2.2}
        )
        out.append(
            Record(
                f"n : nat\n⊢ n + {i} = {i} + n",
                "lia." if i % 2 else "apply foo.",
                "Coq accepted the step." if i % 2 else "Coq rejected the step.",
                s,
            )
        )
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny Llama and its byte-level BPE, trained on EVA prompts and targets."""
    from proofrl.policy.model import load_policy
    from proofrl.policy.tiny import build_tiny_model
    from proofrl.train.eva import prompt_of

    d = tmp_path_factory.mktemp("eva-tiny")
    texts = [prompt_of(r) + render_target(r.critique, r.scores) for r in _records(16)] * 4
    build_tiny_model(d, texts, vocab_size=400, hidden=32, layers=1, heads=2, max_positions=512, seed=0)
    m, tok = load_policy(d, device="cpu")
    return d, m, tok


@pytest.fixture(scope="module")
def merging_tokenizer():
    """A BPE with no pre-tokenizer, taught on score JSON: its merges join the digit with the colon, quote or
    space before it (``": 4``), the case the paper's limitation names."""
    from tokenizers import Tokenizer, models, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    corpus = [
        f'"logic_score": {d}, "align_score": {e}, "clarity_score": {f}'
        for d in "12345"
        for e in "12345"
        for f in "12345"
    ]
    alphabet = sorted(set("".join(corpus)) | set("12345"))
    tok.train_from_iterator(
        corpus * 4,
        trainers.BpeTrainer(
            vocab_size=200, special_tokens=["<pad>", "</s>", "<unk>"], initial_alphabet=alphabet, show_progress=False
        ),
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", name_or_path="merging-bpe"
    )


# -- the formula ----------------------------------------------------------------------------------------------


def test_expected_score_matches_a_hand_computation():
    anchors = [3, 4, 5, 6, 7]
    z = torch.full((2, 10), -1e9)
    z[0, 5], z[0, 6] = math.log(0.4), math.log(0.6)  # P(3) = 0.4, P(4) = 0.6 → 3.6 (the paper's example)
    z[1, anchors] = torch.tensor([1.0, 0.0, 2.0, 0.5, -1.0])
    z[1, 0] = 50.0  # a non-anchor token with most of the mass changes nothing
    e = expected_score(z, anchors)
    assert e[0].item() == pytest.approx(3.6, abs=1e-6)
    w = [math.exp(x / 2.0) for x in (1.0, 0.0, 2.0, 0.5, -1.0)]
    want = sum((i + 1) * wi for i, wi in enumerate(w)) / sum(w)
    assert expected_score(z, anchors, tau=2.0)[1].item() == pytest.approx(want, rel=1e-6)
    assert expected_score(z.to(torch.bfloat16), anchors).dtype == torch.float32
    assert combined_score({"logic": 4.0, "align": 2.0}, {"logic": 3, "align": 1}) == pytest.approx(3.5)
    assert (to_value(5.0), to_value(1.0), to_value(3.0)) == (0.0, -1.0, -0.5)


def test_anchors_must_be_single_tokens(tiny):
    _, _, tok = tiny
    ids = anchor_token_ids(tok)
    assert [tok.decode([i]) for i in ids] == ["1", "2", "3", "4", "5"]
    with pytest.raises(
        ConfigError, match=r"anchor '２' is 3 tokens .* in tokenizer '.+'; every anchor must be a single token"
    ):
        anchor_token_ids(tok, anchors=("1", "２"))


# -- exact score-token indexing -----------------------------------------------------------------------------------


def test_positions_point_at_the_digit_tokens_of_a_byte_level_bpe(tiny):
    _, _, tok = tiny
    text = render_target("Coq accepted it.", {"logic": 3.6, "align": 1.2, "clarity": 5.0})
    assert text.endswith('{"logic_score":4,"align_score":1,"clarity_score":5}')  # continuous targets rounded
    pos = score_token_positions(text, tok, KEYS, anchor_ids=anchor_token_ids(tok))
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert [tok.decode([ids[pos[k]]]) for k in KEYS] == ["4", "1", "5"]
    # the spaced form a model may write is found too, when the tokenizer keeps the digit apart
    spaced = 'ok {"logic_score": 2, "align_score": 3, "clarity_score": 4}'
    p2 = score_token_positions(spaced, tok, KEYS)
    ids2 = tok(spaced, add_special_tokens=False)["input_ids"]
    digits = [tok.decode([ids2[p2[k]]]) for k in KEYS]
    assert digits == ["2", "3", "4"] or pytest.fail(f"byte-level BPE merged a digit: {digits}")


def test_a_digit_merged_with_colon_or_space_is_refused(merging_tokenizer):
    tok = merging_tokenizer
    text = '"logic_score": 4, "align_score": 2, "clarity_score": 3'
    enc = tok(text, add_special_tokens=False)
    i = enc.char_to_token(text.index("4"))
    assert tok.convert_ids_to_tokens(enc["input_ids"][i]) != "4"  # precondition: the merge happened
    assert anchor_token_ids(tok)  # "4" alone is still one token: only the position is wrong
    with pytest.raises(ScorePositionError) as e:
        score_token_positions(text, tok, KEYS)
    assert e.value.reason == "not-an-anchor"


def test_missing_and_ambiguous_positions(tiny):
    _, _, tok = tiny
    with pytest.raises(ScorePositionError, match="missing"):
        score_token_positions('{"logic_score":4,"align_score":2}', tok, KEYS)
    with pytest.raises(ScorePositionError, match="ambiguous"):
        score_token_positions('{"logic_score":4,"logic_score":2,"align_score":2,"clarity_score":1}', tok, KEYS)
    with pytest.raises(ScorePositionError, match="not-an-anchor"):
        score_token_positions('{"logic_score":45,"align_score":2,"clarity_score":1}', tok, KEYS)


def test_examples_count_what_is_left_out_of_the_eva_loss(tiny, merging_tokenizer):
    _, _, tok = tiny
    recs = _records(4)
    good = render_target("fine", recs[0].scores)
    texts = [good, "no json at all", good, good]
    ex, rep = build_examples(recs, tok, targets=texts)
    assert rep.in_eva_loss == 3 and dict(rep.left_out) == {"missing": 1}
    assert ex[1].positions == {} and len(ex[1].target_ids) > 1  # keeps its LM loss
    # truncation: a limit that cuts the target before its scores
    ex, rep = build_examples(recs[:2], tok, max_tokens=12)
    assert dict(rep.left_out) == {"truncated": 2} and all(len(e.prompt_ids) + len(e.target_ids) <= 12 for e in ex)


def test_reading_the_scores_does_not_depend_on_padding(tiny):
    """[left-padded prompt | right-padded target]: each row's E[R] equals that of the row run alone."""
    _, m, tok = tiny
    ex, _ = build_examples(_records(3), tok)
    anchors = anchor_token_ids(tok)
    assert len({len(e.prompt_ids) for e in ex}) > 1 and len({len(e.target_ids) for e in ex}) >= 1
    with torch.no_grad():
        ids, mask, P = collate(ex, tok.pad_token_id, "cpu")
        from proofrl.policy.logprobs import position_ids

        batch_logits = m(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask)).logits
        for i, e in enumerate(ex):
            alone = torch.tensor([e.prompt_ids + e.target_ids])
            lg = m(input_ids=alone).logits
            for j in e.positions.values():
                want = expected_score(lg[0, len(e.prompt_ids) + j - 1], anchors)
                got = expected_score(gather_positions(batch_logits, [i], [P + j])[0], anchors)
                assert got.item() == pytest.approx(want.item(), abs=1e-4)
    # and the scorer (left padding of prompt + output) gives each pair the score it gets alone
    scorer = EvaScorer(m, tok, max_new_tokens=8, batch_size=4)
    prompts = [scorer.prompt(r.state, r.proposal) for r in _records(3)]
    outs = [render_target("ok", r.scores) for r in _records(3)]
    together = scorer.read_expected(prompts, outs)
    for i in range(3):
        alone = scorer.read_expected(prompts[i : i + 1], outs[i : i + 1])[0]
        assert together[i][0] == pytest.approx(alone[0], abs=1e-4) and together[i][1] == []


def test_the_eva_gradient_reaches_exactly_the_score_positions():
    """Reading the logits at the digit's index instead of index − 1 moves the gradient: this test turns red."""
    B, L, V, P = 2, 12, 9, 4
    anchors = [4, 5, 6, 7, 8]
    logits = torch.randn(B, L, V, requires_grad=True)
    ex = [
        Example([0] * 4, [1] * 8, {"logic": 2, "align": 5}, {"logic": 4.0, "align": 1.5}),
        Example([0] * 4, [1] * 8, {"logic": 3}, {"logic": 2.0}),
    ]
    loss, n = eva_term(logits, ex, P, anchor_ids=anchors, dims=("logic", "align"))
    assert n == 3
    loss.backward()
    nonzero = {
        (i, t)
        for i, t in zip(*torch.nonzero(logits.grad.abs().sum(-1), as_tuple=True), strict=True)
        for i, t in [(int(i), int(t))]
    }
    assert nonzero == {(0, P + 2 - 1), (0, P + 5 - 1), (1, P + 3 - 1)}
    assert logits.grad[:, :, :4].abs().sum() == 0  # only the anchors' logits get gradient


def test_training_with_the_eva_loss_lowers_the_eva_mse(tiny):
    from proofrl.policy.model import load_policy

    d, _, _ = tiny
    m, tok = load_policy(d, device="cpu")
    ex, rep = build_examples(_records(8), tok)
    assert rep.in_eva_loss == 8
    before = eva_loss(m, ex, anchor_ids=anchor_token_ids(tok), alpha=0.5, tau=1.0, pad_id=tok.pad_token_id)
    hist = train_eva(m, tok, ex, alpha=0.5, lr=1e-2, batch=4, epochs=10, seed=0)
    after = eva_loss(m, ex, anchor_ids=anchor_token_ids(tok), alpha=0.5, tau=1.0, pad_id=tok.pad_token_id)
    assert after.eva < 0.5 * before.eva and after.lm < before.lm, (before, after, hist)


# -- bad input --------------------------------------------------------------------------------------------------


def test_parsing_flags_bad_outputs():
    assert parse_scores("I think it is fine.").flags == [
        "invalid-json",
        "missing:logic",
        "missing:align",
        "missing:clarity",
    ]
    p = parse_scores('ok {"logic_score": 7, "align_score": 2, "clarity_score": 0.5}')
    assert p.scores == {"logic": 5.0, "align": 2.0, "clarity": 1.0}
    assert p.flags == ["out-of-range:logic", "out-of-range:clarity"]
    p = parse_scores('{"logic_score": 4, "align_score": 2}')
    assert p.scores == {"logic": 4.0, "align": 2.0} and p.flags == ["missing:clarity"]
    p = parse_scores('{"logic_score": 4, "align_score": 2, "clarity_score": 3')  # unclosed: read by regex
    assert p.scores == {"logic": 4.0, "align": 2.0, "clarity": 3.0} and p.flags == ["invalid-json"]


def test_a_dimension_the_output_lacks_is_scored_from_the_logits_and_flagged(tiny):
    _, m, tok = tiny
    scorer = EvaScorer(m, tok, max_new_tokens=8)
    prompt = scorer.prompt("⊢ True", "exact I.")
    got = scorer.read_expected(
        [prompt] * 3, ['fine {"logic_score":4,"align_score":2}', "no json", 'x {"logic_score":9}']
    )
    for exp, _ in got:
        assert set(exp) == {"logic", "align", "clarity"} and all(1.0 <= v <= 5.0 for v in exp.values())
    assert [f for _, f in got] == [
        ["probed:clarity:missing"],
        [f"probed:{d}:missing" for d in ("logic", "align", "clarity")],
        ["probed:logic:not-an-anchor", "probed:align:missing", "probed:clarity:missing"],
    ]
    # a dimension read where the output wrote it is the logit before its digit, whatever is probed after it
    alone = scorer.read_expected([prompt], ['fine {"logic_score":4,"align_score":2,"clarity_score":3}'])[0][0]
    assert got[0][0]["logic"] == pytest.approx(alone["logic"], abs=1e-5) and got[0][0]["align"] == pytest.approx(
        alone["align"], abs=1e-5
    )


def test_bad_data_lines_are_skipped_and_counted(tmp_path):
    good = {
        "state": "⊢ True",
        "proposal": "exact I.",
        "critique": "fine",
        "scores": {"logic": 4.2, "align": 3, "clarity": 5},
    }
    flat = {
        "state": "⊢ True",
        "proposal": "auto.",
        "critique": "ok",
        "logic_score": 2,
        "align_score": 2,
        "clarity_score": 2,
    }
    lines = [
        json.dumps(good),
        "{not json",
        json.dumps({**good, "scores": {"logic": 6, "align": 3, "clarity": 5}}),
        json.dumps({**good, "scores": {"logic": 4}}),
        json.dumps({k: v for k, v in good.items() if k != "critique"}),
        json.dumps(flat),
        "",
    ]
    (tmp_path / "d.jsonl").write_text("\n".join(lines))
    recs, skipped = read_records(tmp_path / "d.jsonl")
    assert [r.proposal for r in recs] == ["exact I.", "auto."]
    assert dict(skipped) == {
        "Expecting property name enclosed in double quotes": 1,
        "score 'logic' = 6 outside 1.0-5.0": 1,
        "score 'align' missing or not a number": 1,
        "field 'critique' missing or not text": 1,
    }
    with pytest.raises(ValueError, match="not a JSON object"):
        parse_record([1, 2])


# -- evaluation metrics -------------------------------------------------------------------------------------------


def test_metrics_by_hand():
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3]))
    recs = [
        Record("s1", "a", "", {"logic": 5, "align": 5, "clarity": 5}),
        Record("s1", "b", "", {"logic": 1, "align": 1, "clarity": 1}),
        Record("s2", "c", "", {"logic": 4, "align": 4, "clarity": 4}),
        Record("s2", "d", "", {"logic": 2, "align": 2, "clarity": 2}),
    ]
    right = [{"logic": 4, "align": 4, "clarity": 4}, {"logic": 2, "align": 2, "clarity": 2}] * 2
    tied = [{"logic": 3, "align": 3, "clarity": 3}] * 4
    m = metrics(right, recs)
    assert m["pairs"] == 2 and m["ranking_acc"] == 1.0 and m["mse"]["logic"] == pytest.approx((1 + 1 + 0 + 0) / 4)
    assert metrics(tied, recs)["ranking_acc"] == 0.5  # ties count one half


# -- registry, recipe, commands ----------------------------------------------------------------------------------


def test_step_reward_and_value_kind_are_registered():
    assert "eva" in STEP_REWARDS
    from proofrl.policy.tactic import make_value_fn

    with pytest.raises(ConfigError, match="no reward model directory"):
        make_value_fn("eva:/nonexistent-dir")


def test_the_recipe_holds_the_paper_defaults_and_refuses_bad_keys():
    from proofrl.train.recipes import loop_for

    assert loop_for("eva").name == "eva"
    cfg = load_config("eva")
    assert (cfg.algorithm.alpha, cfg.algorithm.tau, cfg.optim.lr, cfg.optim.batch, cfg.optim.epochs) == (
        0.5,
        1.0,
        2e-5,
        8,
        3,
    )
    assert (cfg.model.lora.r, cfg.model.lora.alpha) == (16, 32)
    assert cfg.model.lora.target_modules == (
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    )
    assert load_config("eva", ["algorithm.alpha=0", "optim.epochs=1"]).algorithm.alpha == 0
    with pytest.raises(ConfigError, match=r"unknown keys in algorithm: \['alfa'\]"):
        load_config("eva", ["algorithm.alfa=1"])
    with pytest.raises(ConfigError, match=r"algorithm.tau must be > 0"):
        load_config("eva", ["algorithm.tau=0"])


def _one_line(result) -> str:
    text = result.output.strip()
    assert result.exit_code != 0 and len(text.splitlines()) == 1 and "Traceback" not in text, text
    return text


def test_train_and_eval_rm_commands(tiny, tmp_path):
    d, _, _ = tiny
    rows = [{"state": r.state, "proposal": r.proposal, "critique": r.critique, "scores": r.scores} for r in _records(6)]
    data = tmp_path / "train.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    runner = CliRunner()
    assert "unknown keys in optim: ['lrate']" in _one_line(
        runner.invoke(app, ["train", "--recipe", "eva", "--set", "optim.lrate=1"])
    )
    out = tmp_path / "run"
    res = runner.invoke(
        app,
        [
            "train",
            "--recipe",
            "eva",
            "--threads",
            "2",
            "--set",
            f"model.path={d}",
            "--set",
            f"data.train={data}",
            "--set",
            f"data.eval={data}",
            "--set",
            "optim.epochs=1",
            "--set",
            "eval.max_tokens=8",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["index"] == {"examples": 6, "in_eva_loss": 6, "left_out": {}}
    assert set(summary["eval"]["mse"]) == {"logic", "align", "clarity"}
    assert json.loads((out / "model" / "eva_config.json").read_text())["alpha"] == 0.5
    epochs = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]  # the run folder of every loop
    assert [e["epoch"] for e in epochs] == [1] and epochs[0]["loss"] == summary["history"][0]["loss"]
    res = runner.invoke(
        app,
        [
            "eval",
            "rm",
            "--data",
            str(data),
            "--model",
            str(out / "model"),
            "--max-new-tokens",
            "8",
            "--out",
            str(tmp_path / "ev"),
        ],
    )
    assert res.exit_code == 0, res.output
    report = (tmp_path / "ev" / "report.md").read_text()
    assert "| EVA (E[R] over anchors) |" in report and (tmp_path / "ev" / "table4.png").stat().st_size > 1000
    assert "no model directory" in _one_line(
        runner.invoke(app, ["eval", "rm", "--data", str(data), "--model", str(tmp_path / "nope")])
    )


def test_an_eva_run_resumes_where_it_stopped_and_ends_as_an_unbroken_one(tiny, tmp_path):
    """Each epoch leaves a checkpoint (weights, optimiser, the shuffle's generator, every RNG): a run of 2 epochs
    cut after the first and resumed ends with the same weights and the same log as one run straight through; a
    resume that changes what the run computes is one line."""
    from safetensors.torch import load_file

    from proofrl.errors import ConfigError
    from proofrl.train.eva import load_config, run

    d, _, _ = tiny
    data = tmp_path / "train.jsonl"
    rows = [{"state": r.state, "proposal": r.proposal, "critique": r.critique, "scores": r.scores} for r in _records(6)]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    common = [f"model.path={d}", f"data.train={data}", "data.eval=", "optim.batch=2", "logger=[jsonl]"]

    def recipe(out, *more):
        return load_config("eva", [*common, f"out={out}", *more])

    straight = run(recipe(tmp_path / "straight", "optim.epochs=2"))
    run(recipe(tmp_path / "cut", "optim.epochs=1"))
    assert sorted(p.name for p in (tmp_path / "cut" / "checkpoints").iterdir()) == ["epoch_0001"]
    with pytest.raises(ConfigError, match=r"optim\.lr: 2e-05 -> 0\.001"):
        run(recipe(tmp_path / "cut", "optim.epochs=2", "optim.lr=0.001"))
    resumed = run(recipe(tmp_path / "cut", "optim.epochs=2"))
    assert [h["epoch"] for h in resumed["history"]] == [0, 1]
    assert [h["loss"] for h in resumed["history"]] == [h["loss"] for h in straight["history"]]
    logged = [json.loads(x)["epoch"] for x in (tmp_path / "cut" / "metrics.jsonl").read_text().splitlines()]
    assert logged == [1, 2]
    (weights,) = [p.name for p in (tmp_path / "straight" / "model").glob("*.safetensors")]  # LoRA: the adapter
    a = load_file(str(tmp_path / "straight" / "model" / weights))
    b = load_file(str(tmp_path / "cut" / "model" / weights))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
