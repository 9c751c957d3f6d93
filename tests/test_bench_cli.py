"""`proofrl bench` at its smoke size through the command line: real Coq, the tiny tactic model taught here,
results per (claim, seed), the report with a verdict line, resuming after a kill with the same numbers."""

import json
import shutil

import pytest
from conftest import requires_coq
from typer.testing import CliRunner

from proofrl.cli import app

CLAIM = "reap-mcts-vs-best-first"


def bench(out, *extra: str):
    r = CliRunner().invoke(app, ["bench", "--smoke", "--claim", CLAIM, "--seeds", "2", "--out", str(out), *extra])
    assert r.exit_code == 0, r.output
    return r.output


@pytest.fixture(scope="module")
def smoke_assets(tmp_path_factory):
    """The smoke size's tactic assets, built once (by the first bench run) and copied into each test's folder."""
    return tmp_path_factory.mktemp("bench-assets")


def with_assets(out, smoke_assets):
    if (smoke_assets / "tactic-assets").is_dir():
        shutil.copytree(smoke_assets / "tactic-assets", out / "tactic-assets")


def keep_assets(out, smoke_assets):
    if not (smoke_assets / "tactic-assets").is_dir():
        shutil.copytree(out / "tactic-assets", smoke_assets / "tactic-assets")


@requires_coq
def test_bench_smoke_reports_and_resumes_with_the_same_numbers(tmp_path, smoke_assets):
    out = tmp_path / "bench"
    out.mkdir()
    with_assets(out, smoke_assets)
    first = bench(out)
    keep_assets(out, smoke_assets)
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["claim"], r["seed"]) for r in lines] == [(CLAIM, 0), (CLAIM, 1)]
    for r in lines:
        assert set(r["arms"]) == {"best-first", "mcts"}
        assert len(r["arms"]["mcts"]) == r["size"] == 2
        assert r["arms"]["mcts"].keys() == r["arms"]["best-first"].keys()  # paired: the same theorems
        assert all(v in (0.0, 1.0) for arm in r["arms"].values() for v in arm.values())
    report = (out / "report.md").read_text()
    assert any(v in report for v in ("**holds**", "**does not hold**", "**cannot tell at this size**"))
    assert "| kimina-error-correction | kimina |" in report and "no finished seed" in report  # every claim listed
    assert (out / f"{CLAIM}.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "claims.png").read_bytes()[:4] == b"\x89PNG" and "](claims.png)" in report  # the overview
    summary = json.loads((out / "summary.json").read_text())["claims"][CLAIM]
    assert summary["seeds"] == [0, 1] and summary["theorems"] == 2
    # the machine's paces, measured once for the sitting and kept with each seed it ran
    assert lines[0]["machine"] == lines[1]["machine"] and lines[0]["machine"]["coq_pace_s"] > 0
    assert lines[0]["machine"]["model_pace_s"] > 0 and "Machine paces (2 of 2 seeds timed" in report
    assert lines[0]["machine"]["torch_build"]["cpu_capability"] in report  # the CPU kernels the model ran on
    assert f"{CLAIM}:" in first

    # a kill during seed 1: its line was cut half-way; the rerun keeps seed 0 and measures seed 1 again, identically
    (out / "results.jsonl").write_text(json.dumps(lines[0]) + "\n" + json.dumps(lines[1])[:40])
    again = bench(out)
    assert "seed 0: kept from an earlier run" in again
    from proofrl.runner import read_rows

    rerun = [r for r in read_rows(out / "results.jsonl") if r["seed"] == 1]
    assert rerun and rerun[-1]["arms"] == lines[1]["arms"]


@requires_coq
def test_the_library_learning_claims_run_at_smoke_size_in_file_order(tmp_path, smoke_assets):
    """Online against offline memory: rows (e) and (f) on the same lemmas in file order, the online memory growing
    by each lemma's human proof once it was tried, the offline one not. Retrieval in the prompt: row (i) with the
    model taught without and with retrieved context, on the same lemmas. MCTS against best-first: row (j) searched
    by each engine."""
    out = tmp_path / "bench"
    out.mkdir()
    with_assets(out, smoke_assets)
    claims = (
        "tactician-online-memory",
        "rango-retrieval-in-prompt",
        "rango-retrieval-model-alone",
        "reap-mcts-vs-best-first-memory",
        "reap-mcts-vs-best-first-beyond-core",
        "rango-retrieval-model-alone-beyond-core",
    )
    r = CliRunner().invoke(
        app, ["bench", "--smoke", *(x for c in claims for x in ("--claim", c)), "--seeds", "1", "--out", str(out)]
    )
    assert r.exit_code == 0, r.output
    keep_assets(out, smoke_assets)
    lines = {x["claim"]: x for x in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert set(lines) == set(claims)
    said = r.output.splitlines()  # each row's count is said (and so is a kept row refused, with why)
    assert any(x.startswith("(e) ") and "/2 proved" in x for x in said), r.output
    for line in lines.values():
        a, b = line["arms"].values()
        assert a.keys() == b.keys() and len(a) == line["size"] == 2
        assert all(v in (0.0, 1.0) for v in (*a.values(), *b.values()))
    seed = out / "tactician-online-memory" / "seed-0"
    pairs = {
        row: [
            json.loads(x)["memory_pairs"]
            for x in (seed / f"{row}-best-first" / "results.jsonl").read_text().splitlines()
        ]
        for row in "ef"
    }
    assert pairs["e"][0] == pairs["e"][1] and pairs["f"][1] > pairs["f"][0], pairs
    taught = {json.loads((d / "ready.json").read_text())["retrieval"] for d in out.glob("library-tactic-model*")}
    assert taught == {True, False}
    seed = out / "rango-retrieval-in-prompt" / "seed-0"
    assert all(len(list((seed / kind / "i-best-first" / "trees").iterdir())) == 2 for kind in ("without", "with"))
    # the model alone (row k): the same two models, and every tactic tried came from the model, none from the memory
    for seed, kind in [(out / c / "seed-0", k) for c in claims if "model-alone" in c for k in ("without", "with")]:
        trees = [json.loads(t.read_text()) for t in (seed / kind / "k-best-first" / "trees").iterdir()]
        assert len(trees) == 2
        sources = {e["source"] for tree in trees for e in tree["edges"]}
        assert sources and sources <= {"hf"}, (kind, sources)
    # MCTS against best-first: the same row (j, or h without CoqHammer) on the same lemmas, each engine's own trees
    from proofrl.eval.provers import hammer_installed

    row = "j" if hammer_installed() else "h"
    for claim in ("reap-mcts-vs-best-first-memory", "reap-mcts-vs-best-first-beyond-core"):
        seed = out / claim / "seed-0"
        for engine in ("best-first", "mcts"):
            trees = list((seed / engine / f"{row}-{engine}" / "trees").iterdir())
            assert len(trees) == 2 and {json.loads(t.read_text())["search"]["algorithm"] for t in trees} == {engine}


@requires_coq
def test_the_step_level_claims_run_at_smoke_size(tmp_path, smoke_assets):
    with_assets(tmp_path, smoke_assets)
    r = CliRunner().invoke(
        app,
        [
            "bench",
            "--smoke",
            "--claim",
            "leanlistener-prec8",
            "--claim",
            "leanlistener-proving",
            "--seeds",
            "1",
            "--out",
            str(tmp_path),
        ],
    )
    assert r.exit_code == 0, r.output
    keep_assets(tmp_path, smoke_assets)
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [x["claim"] for x in lines] == ["leanlistener-prec8", "leanlistener-proving"]
    proving = lines[1]["arms"]
    assert set(proving) == {"SFT", "step-level GRPO"} and len(proving["SFT"]) == 2
    assert all(v in (0.0, 1.0) for arm in proving.values() for v in arm.values())
    line = lines[0]
    assert set(line["arms"]) == {"SFT", "step-level GRPO"}
    assert line["arms"]["SFT"].keys() == line["arms"]["step-level GRPO"].keys() and line["arms"]["SFT"]
    assert all(0.0 <= v <= 1.0 for arm in line["arms"].values() for v in arm.values())
    tactics = json.loads((tmp_path / "leanlistener-prec8" / "seed-0" / "tactics.json").read_text())
    assert {"intros.", "samples", "top"} <= set(tactics["step-level GRPO"])


def test_an_unknown_claim_is_one_line(tmp_path):
    r = CliRunner().invoke(app, ["bench", "--claim", "nope", "--out", str(tmp_path)])
    assert r.exit_code == 2
    assert "is not a claim" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "results.jsonl").exists()


def test_the_verdict_line_gives_the_size_that_would_tell():
    from proofrl.bench.claims import CLAIMS
    from proofrl.bench.run import verdict_line
    from proofrl.bench.stats import compare

    claim = CLAIMS[CLAIM]
    a = [[0, 1, 0, 1, 0, 0, 1, 0], [0, 1, 0, 0, 0, 1, 1, 0]]
    b = [[0, 1, 1, 1, 0, 0, 1, 0], [0, 1, 0, 1, 0, 1, 1, 0]]
    line = verdict_line(claim, compare(a, b))
    assert line.startswith("**cannot tell at this size**") and "theorems would tell" in line
    strong = compare([[0] * 30] * 2, [[1] * 30] * 2)
    assert verdict_line(claim, strong).startswith("**holds**")
    assert verdict_line(claim, compare([[1] * 30] * 2, [[0] * 30] * 2)).startswith("**does not hold**")


def test_finished_seeds_without_a_common_theorem_say_so_instead_of_no_finished_seed(tmp_path):
    """A metric undefined on every theorem at some size (an uplift slope where no group was mixed) leaves seeds
    finished with empty arms: the report says that, not that nothing ran."""
    from proofrl.bench.claims import get_claims
    from proofrl.bench.run import write_report

    rows = [
        {"claim": "unlikely-uplift-rank", "seed": s, "size": 2, "arms": {"GRPO": {}, "GRPO + unlikeliness": {}},
         "seconds": 1.0, "cpu_seconds": 1.0, "load_before": 0.5, "load_after": 0.5}
        for s in (0, 1)
    ]  # fmt: skip
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = write_report(tmp_path, get_claims(None), smoke=True)
    assert summary["claims"]["unlikely-uplift-rank"]["seeds"] == [0, 1]
    report = (tmp_path / "report.md").read_text()
    line = next(x for x in report.splitlines() if x.startswith("| unlikely-uplift-rank |"))
    assert "2 seeds finished, but none of their theorems has a value" in line
    assert "no finished seed" in next(x for x in report.splitlines() if x.startswith("| kimina-error-correction |"))


def _claim_names() -> list[str]:
    from proofrl.bench.claims import CLAIMS

    return list(CLAIMS)


@pytest.mark.parametrize("name", _claim_names())
def test_implemented_claims_have_a_size_and_arms(name):
    from proofrl.bench.claims import CLAIMS

    c = CLAIMS[name]
    assert c.implemented and c.size > c.smoke_size > 0 and c.baseline != c.treatment


@requires_coq
def test_the_eva_claims_run_at_smoke_size_and_share_one_run(tmp_path, smoke_assets):
    """The two EVA claims share one run per seed: the second reads the first one's arms. (The reap, Rewarding
    the Unlikely, kimina and LeanListener DPO claims have their own smoke tests: tests/test_bench_*.py.)"""
    with_assets(tmp_path, smoke_assets)
    names = ["eva-ranking", "eva-ranking-value-head"]
    r = CliRunner().invoke(
        app, ["bench", "--smoke", *(x for n in names for x in ("--claim", n)), "--seeds", "1", "--out", str(tmp_path)]
    )
    assert r.exit_code == 0, r.output
    keep_assets(tmp_path, smoke_assets)
    lines = {x["claim"]: x for x in map(json.loads, (tmp_path / "results.jsonl").read_text().splitlines())}
    assert set(lines) == set(names)
    eva = lines["eva-ranking"]["arms"]
    assert eva == lines["eva-ranking-value-head"]["arms"]
    assert set(eva) == {"parsed text score", "E[R] over anchor logits", "value head"}
    assert eva["value head"] and all(v.keys() == eva["value head"].keys() for v in eva.values())
    assert all(0.0 <= x <= 1.0 for v in eva.values() for x in v.values())


def test_per_state_ranking_accuracy_counts_each_state_s_pairs_and_ties_half():
    from proofrl.bench.eva import per_state_accuracy
    from proofrl.eval.rm import Record

    def rec(thm, step, score):
        return Record(
            f"{thm}/{step}",
            "p",
            "c",
            {"logic": score, "align": score, "clarity": score},
            extra={"theorem": thm, "step": step},
        )

    records = [
        rec("a", 0, 5.0),
        rec("a", 0, 1.0),
        rec("a", 0, 3.0),
        rec("b", 1, 4.0),
        rec("b", 1, 2.0),
        rec("c", 0, 3.0),
    ]
    preds = [{d: v for d in ("logic", "align", "clarity")} for v in (4.0, 2.0, 4.0, 3.0, 3.0, 1.0)]
    acc = per_state_accuracy(preds, records)
    # a: pairs (5>1) right, (5>3) tie, (3>1) right -> 2.5 / 3; b: one pair, a tie -> 0.5; c: no pair, no value
    assert acc == pytest.approx({"a#0": 2.5 / 3, "b#1": 0.5})


def test_a_held_out_theorem_counts_only_when_proved_with_a_valid_final_check(tmp_path):
    from proofrl.bench.reap import proved_in
    from proofrl.provers.base import Status, Verdict
    from proofrl.search.engine import SearchResult

    rows = [
        SearchResult("a", "proved", "trivial.", Verdict(Status.VALID)),
        SearchResult("b", "failed"),
        SearchResult("c", "unsound", "admit.", Verdict(Status.REJECTED, ("admitted",))),
    ]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r.line(), default=str) + "\n" for r in rows))
    assert proved_in(path) == {"a": 1.0, "b": 0.0, "c": 0.0}


@requires_coq
def test_a_plan_runs_its_claims_for_its_seeds_and_says_why_the_others_did_not_run(tmp_path, smoke_assets):
    """The plan's seed and (at the smoke size) size name what runs: a line already recorded for them is kept, the
    other seeds and claims are not run, and a claim the plan leaves out says why."""
    import yaml

    from proofrl.bench.claims import CLAIMS

    plan = {
        "seeds": [7],
        "budget_hours": 1.0,
        "claims": {n: {"size": None, "why": f"{n} is left for later"} for n in CLAIMS}
        | {CLAIM: {"size": 100, "arms": list(CLAIMS[CLAIM].arms), "hours": 0.5, "why": "the wiring"}},
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    out = tmp_path / "bench"
    out.mkdir()
    with_assets(out, smoke_assets)
    arms = {"best-first": {"t1": 0.0, "t2": 1.0}, "mcts": {"t1": 1.0, "t2": 1.0}}
    recorded = {"claim": CLAIM, "seed": 7, "size": 2, "arms": arms}
    times = {"seconds": 1.0, "cpu_seconds": 1.0, "load_before": 0.0, "load_after": 0.0}
    (out / "results.jsonl").write_text(json.dumps(recorded | times) + "\n")
    r = CliRunner().invoke(app, ["bench", "--smoke", "--plan", str(path), "--out", str(out)])
    assert r.exit_code == 0, r.output
    keep_assets(out, smoke_assets)
    assert f"{CLAIM} seed 7: kept from an earlier run" in r.output
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [(x["claim"], x["seed"], x["size"]) for x in lines] == [(CLAIM, 7, 2)]  # nothing else ran
    assert json.loads((out / "summary.json").read_text())["claims"][CLAIM]["seeds"] == [7]
    assert "eva-ranking: not run by the plan: eva-ranking is left for later" in r.output
    both = CliRunner().invoke(app, ["bench", "--plan", str(path), "--seeds", "2", "--out", str(out)])
    assert both.exit_code != 0 and "leave out --claim and --seeds" in both.output
