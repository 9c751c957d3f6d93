"""An index of bench plans (``proofrl bench --plan docs/claims-plans.yaml``): every plan in the order written, and
each claim's latest verdict read from them; a bad index is one line naming what to fix."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from proofrl.bench.claims import CLAIMS, get_claims
from proofrl.bench.plan import load_plans
from proofrl.bench.run import write_report
from proofrl.bench.standing import standing, write_standing
from proofrl.errors import ConfigError

DOCS = Path(__file__).resolve().parent.parent / "docs"
REGISTERED = {n: c.arms for n, c in CLAIMS.items()}


def test_the_shipped_index_lists_every_plan_file_once_in_the_order_written() -> None:
    index, plans = load_plans(DOCS / "claims-plans.yaml", REGISTERED)
    names = [n for n, _ in plans]
    assert index and names[0] == "claims-plan"
    on_disk = {p.stem for p in DOCS.glob("claims-p*.yaml")} - {"claims-plans"}
    assert set(names) == on_disk and len(names) == len(on_disk)  # a plan left out of the index would not rerun
    assert names.index("claims-pilot-4") < names.index("claims-plan-4")
    assert names.index("claims-pilot-5") < names.index("claims-plan-5")


def test_a_plan_file_is_not_an_index() -> None:
    index, plans = load_plans(DOCS / "claims-plan-5.yaml", REGISTERED)
    assert not index and [n for n, _ in plans] == ["claims-plan-5"]


@pytest.mark.parametrize(
    "tree, says",
    [
        ({"plans": [], "seeds": [1]}, "one key, plans"),
        ({"plans": "claims-plan.yaml"}, "one key, plans"),
        ({"plans": [3]}, "each entry is a plan file"),
        ({"plans": ["claims-plan.yaml", "claims-plan.yaml"]}, "share a name"),
        ({"plans": ["no-such-plan.yaml"]}, "no such plan file"),
    ],
)
def test_a_bad_index_is_one_line_naming_the_fix(tmp_path, tree, says) -> None:
    for p in DOCS.glob("claims-plan*.yaml"):
        shutil.copy(p, tmp_path)
    index = tmp_path / "index.yaml"
    index.write_text(yaml.safe_dump(tree))
    with pytest.raises(ConfigError) as e:
        load_plans(index, REGISTERED)
    assert says in str(e.value) and "\n" not in str(e.value)


def entry(verdict: str) -> dict:
    return {"comparison": {"verdict": verdict}}


def test_the_latest_measuring_plan_gives_the_verdict_and_a_later_plan_that_left_the_claim_out_keeps_it() -> None:
    claims = get_claims(["eva-ranking", "reap-value-head", "rango-retrieval-in-prompt"])
    summaries = [
        ("first", {"claims": {"eva-ranking": entry("cannot tell at this size"), "reap-value-head": entry("holds")}}),
        ("second", {"claims": {"eva-ranking": entry("holds"), "reap-value-head": {"not_planned": "not this one"}}}),
        (
            "third",
            {"claims": {"eva-ranking": {"not_planned": "done"}, "rango-retrieval-in-prompt": {"not_planned": "x"}}},
        ),
    ]
    got = standing(claims, summaries)
    assert got["eva-ranking"]["from"] == "second" and got["eva-ranking"]["comparison"]["verdict"] == "holds"
    assert got["reap-value-head"]["from"] == "first"
    assert got["rango-retrieval-in-prompt"] == {"not_planned": "x", "from": "third"}


def kept_summary(tmp_path: Path, name: str) -> tuple[str, dict]:
    """A plan's report, written from its kept result lines (no claim runs)."""
    _, [(_, plan)] = load_plans(DOCS / f"{name}.yaml", REGISTERED)
    out = tmp_path / name
    out.mkdir()
    with gzip.open(DOCS / f"{name}-results.jsonl.gz", "rt") as f:
        (out / "results.jsonl").write_text(f.read())
    return name, write_report(out, get_claims(None), plan=plan)


def test_the_standing_of_the_kept_plans_gives_their_verdicts_and_sizes(tmp_path) -> None:
    summaries = [
        kept_summary(tmp_path, n)
        for n in (
            "claims-plan-3",
            "claims-pilot-4",
            "claims-plan-4",
            "claims-plan-5",
            "claims-pilot-6",
            "claims-plan-6",
        )
    ]
    rows = write_standing(tmp_path, summaries)
    assert rows["eva-ranking"]["verdict"].startswith("holds") and rows["eva-ranking"]["from"] == "claims-plan-4"
    assert rows["eva-ranking-value-head"]["verdict"].startswith("does not hold")
    assert rows["kimina-error-correction"]["verdict"].startswith("holds")
    memory = rows["reap-mcts-vs-best-first-memory"]
    assert memory["verdict"].startswith("cannot tell") and "2595 lemmas would tell" in memory["would_tell"]
    assert rows["unlikely-passN"]["verdict"].startswith("not run by the plan")
    proving = rows["leanlistener-proving"]
    assert proving["from"] == "claims-plan-6" and "9459 theorems would tell" in proving["would_tell"]
    text = (tmp_path / "standing.md").read_text()
    assert "**3 of 23 claims have a verdict: 2 hold, 1 does not hold.**" in text and (tmp_path / "claims.png").is_file()
    assert json.loads((tmp_path / "standing.json").read_text()) == rows


def test_the_twelfth_plans_kept_lines_give_its_two_verdicts_at_48_seeds(tmp_path) -> None:
    """reap's learning claims at 267 theorems x 48 seeds, from the committed lines alone: both cannot tell, the
    analysis asks for theorems, and at the pool's 267 no number of seeds would tell (the seeds add no spread and
    the theorems' part alone exceeds what the effect allows), as docs/claims.md reports."""
    from proofrl.bench.stats import Z_80, Z_975, variance_components

    _, summary = kept_summary(tmp_path, "claims-plan-12")
    lines = [json.loads(x) for x in (tmp_path / "claims-plan-12" / "results.jsonl").read_text().splitlines()]
    runs = [r["arms"] for r in lines if r["claim"] == "reap-search-and-learn"]
    for base, treat in (("round 0", "round 1"), ("policy only", "policy + value head")):
        d = np.array([[a[treat][t] - a[base][t] for t in sorted(a[base])] for a in runs])
        var_s, var_t, _ = variance_components(d)
        assert d.shape == (48, 267) and var_s == 0.0
        assert var_t / 267 > (abs(d.mean()) / (Z_975 + Z_80)) ** 2  # no seed count brings the bound within reach
    learn = summary["claims"]["reap-search-and-learn"]["comparison"]
    value = summary["claims"]["reap-value-head"]["comparison"]
    for c in (learn, value):
        assert (c["theorems"], c["seeds"], c["seeds_needed"]) == (267, 48, None)
        assert c["verdict"] == "cannot tell at this size" and c["difference"]["low"] < 0 < c["difference"]["high"]
    assert round(learn["difference"]["mean"] * 267 * 48) == 2 and learn["theorems_needed"] == 29442
    assert round(value["difference"]["mean"] * 267 * 48) == -1 and value["theorems_needed"] == 27339
    assert round(learn["p_value"], 2) == 0.90 and value["p_value"] == 1.0


def test_the_thirteenth_plans_kept_lines_give_its_two_verdicts_at_29_seeds(tmp_path) -> None:
    """PPO epochs and passN at 78 theorems x 29 seeds, from the committed lines alone: both cannot tell; PPO epochs'
    analysis asks about 930 theorems at 29 seeds and, with no seed spread and no theorems' part, about 346 seeds at
    the pool's 78; passN's arms differ on two theorem-seeds, one each way (no size), as docs/claims.md reports."""
    from proofrl.bench.stats import Z_80, Z_975, variance_components

    _, summary = kept_summary(tmp_path, "claims-plan-13")
    lines = [json.loads(x) for x in (tmp_path / "claims-plan-13" / "results.jsonl").read_text().splitlines()]
    assert sorted((r["claim"], r["seed"]) for r in lines) == sorted(
        (c, s) for c in ("unlikely-passN", "unlikely-ppo-epochs") for s in range(250, 279)
    )
    epochs, passn = (summary["claims"][c]["comparison"] for c in ("unlikely-ppo-epochs", "unlikely-passN"))
    for c in (epochs, passn):
        assert (c["theorems"], c["seeds"], c["seeds_needed"]) == (78, 29, None)
        assert c["verdict"] == "cannot tell at this size" and c["difference"]["low"] < 0 < c["difference"]["high"]
        assert c["p_value"] == 1.0
    assert round(epochs["difference"]["mean"] * 78 * 29) == 2 and epochs["theorems_needed"] == 930
    assert passn["difference"]["mean"] == 0.0 and passn["theorems_needed"] is None
    runs = [r["arms"] for r in lines if r["claim"] == "unlikely-ppo-epochs"]
    d = np.array([[a["2 epochs"][t] - a["1 epoch"][t] for t in sorted(a["1 epoch"])] for a in runs])
    var_s, var_t, var_e = variance_components(d)
    assert (np.count_nonzero(d), var_s, var_t) == (6, 0.0, 0.0)
    assert math.ceil((var_e / 78) / (d.mean() / (Z_975 + Z_80)) ** 2) == 346  # seeds at the pool's 78
    runs = [r["arms"] for r in lines if r["claim"] == "unlikely-passN"]
    d = np.array([[a["GRPO + unlikeliness"][t] - a["GRPO"][t] for t in sorted(a["GRPO"])] for a in runs])
    assert sorted(d[d != 0]) == [-1.0, 1.0]


def test_the_fourteenth_pilots_kept_lines_give_its_verdict_and_the_seeds_it_asks(tmp_path) -> None:
    """Search-and-learn beside the library's sources at 267 theorems x 6 seeds, from the committed lines alone:
    cannot tell, -0.6 points, p = 0.14, and seeds (about 84), not theorems, would tell, as docs/claims.md reports."""
    _, summary = kept_summary(tmp_path, "claims-pilot-14")
    lines = [json.loads(x) for x in (tmp_path / "claims-pilot-14" / "results.jsonl").read_text().splitlines()]
    assert sorted((r["claim"], r["seed"]) for r in lines) == [
        ("reap-search-and-learn-library", s) for s in range(300, 306)
    ]
    c = summary["claims"]["reap-search-and-learn-library"]["comparison"]
    assert (c["theorems"], c["seeds"]) == (267, 6) and c["verdict"] == "cannot tell at this size"
    assert round(c["difference"]["mean"] * 1000) == -6 and round(c["p_value"], 2) == 0.14
    assert c["theorems_needed"] is None and c["seeds_needed"] == 84


def test_bench_runs_an_index_plan_by_plan_and_writes_the_standing(tmp_path) -> None:
    """Through the CLI: each plan into OUT/NAME with its report, then OUT/standing.md; a plan that sizes no claim
    runs none (no assets built), and --smoke with an index is one line."""
    from typer.testing import CliRunner

    from proofrl.cli import app

    for name in ("early", "late"):
        plan = {
            "seeds": [7],
            "budget_hours": 1.0,
            "claims": {n: {"size": None, "why": f"{n} waits ({name})"} for n in CLAIMS},
        }
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(plan))
    index = tmp_path / "plans.yaml"
    index.write_text(yaml.safe_dump({"plans": ["early.yaml", "late.yaml"]}))
    out = tmp_path / "bench"
    r = CliRunner().invoke(app, ["bench", "--plan", str(index), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert (out / "early" / "report.md").is_file() and (out / "late" / "report.md").is_file()
    assert not (out / "tactic-assets").exists()
    rows = json.loads((out / "standing.json").read_text())
    assert rows["eva-ranking"] == {
        "paper": "EVA",
        "verdict": "not run by the plan: eva-ranking waits (late)",
        "from": "",
        "would_tell": "",
    }
    smoke = CliRunner().invoke(app, ["bench", "--smoke", "--plan", str(index), "--out", str(out)])
    assert smoke.exit_code != 0 and "give a plan file, not an index" in smoke.output


def test_the_toy_claims_kept_lines_give_the_pilots_sizes_and_the_plans_two_verdicts(tmp_path) -> None:
    """Rewarding the Unlikely's toy claims, from the committed lines alone: the fifteenth pilot (256 states x 6
    seeds) holds A.4 and asks 84 seeds for A.3; the fifteenth plan holds A.4 at 6 new seeds (+22.2 points) and the
    sixteenth A.3 at the 84 (-2.4 points), as docs/claims.md reports."""
    _, pilot = kept_summary(tmp_path, "claims-pilot-15")
    a3, a4 = (
        pilot["claims"][c]["comparison"] for c in ("unlikely-toy-grpo-pass32", "unlikely-toy-unlikeliness-pass32")
    )
    assert a3["verdict"] == "cannot tell at this size" and (a3["theorems_needed"], a3["seeds_needed"]) == (None, 84)
    assert a4["verdict"] == "holds" and a4["theorems_needed"] == 5
    plans = {n: kept_summary(tmp_path, n)[1]["claims"] for n in ("claims-plan-15", "claims-plan-16")}
    a4 = plans["claims-plan-15"]["unlikely-toy-unlikeliness-pass32"]
    a3 = plans["claims-plan-16"]["unlikely-toy-grpo-pass32"]
    assert (a4["seeds"], a3["seeds"]) == (list(range(410, 416)), list(range(420, 504)))
    assert a4["comparison"]["verdict"] == a3["comparison"]["verdict"] == "holds"
    assert round(a4["comparison"]["difference"]["mean"] * 1000) == 222
    assert round(a3["comparison"]["difference"]["mean"] * 1000) == -24 and a3["comparison"]["difference"]["high"] < 0


def test_a_toy_seed_measures_the_same_values_twice(tmp_path) -> None:
    """The same seed, run twice in two folders, gives the same value on every state (on one machine: under other
    CPU kernels the toy's GRPO samples differently, docs/claims.md)."""
    from proofrl.bench.claim import ClaimRun
    from proofrl.bench.unlikely_toy import toy_pass_at_32

    a, b = (
        toy_pass_at_32(ClaimRun(seed=410, size=16, out=tmp_path / d / "c" / "seed-410", workers=1, assets=None))
        for d in ("one", "two")
    )
    assert a == b and not (tmp_path / "one" / "unlikely-toy-shared").samefile(tmp_path / "two" / "unlikely-toy-shared")


def test_the_toy_uplift_claims_kept_lines_give_four_times_cannot_tell_and_the_sizes_asked(tmp_path) -> None:
    """The toy's uplift over rank, from the committed lines alone: the seventeenth pilot asks about 16,042 states,
    the seventeenth plan at 16,014 of them asks about 283 seeds, the eighteenth at 373 seeds still cannot tell
    (-0.003 [-0.010, 0.004]) and asks about 2,235, and the nineteenth at 2,800 seeds (143 states left) cannot tell
    (-0.0025 [-0.0054, 0.0005]) and asks about 5,025, as docs/claims.md reports."""
    got = {
        n: kept_summary(tmp_path, n)[1]["claims"]["unlikely-toy-uplift-rank"]["comparison"]
        for n in ("claims-pilot-17", "claims-plan-17", "claims-plan-18", "claims-plan-19")
    }
    assert {c["verdict"] for c in got.values()} == {"cannot tell at this size"}
    sizes = [(c["theorems"], c["seeds"], c["theorems_needed"], c["seeds_needed"]) for c in got.values()]
    assert sizes == [(256, 6, 16042, None), (16014, 6, None, 283), (232, 373, None, 2235), (143, 2800, None, 5025)]
    d18, d19 = got["claims-plan-18"]["difference"], got["claims-plan-19"]["difference"]
    assert round(d18["mean"] * 1000) == -3 and d18["low"] < 0 < d18["high"]
    assert round(d19["mean"] * 10000) == -25 and round(d19["low"] * 10000) == -54 and round(d19["high"] * 10000) == 5
    assert got["claims-plan-19"]["p_value"] < 0.05  # the states' permutation test rejects 0; the seeds' spread does not


def test_the_twentieth_pilots_kept_lines_give_the_whole_proof_uplift_cannot_tell_and_137_seeds(tmp_path) -> None:
    """The whole-proof uplift over rank, from the committed lines alone: 78 of the 490 training theorems count, GRPO's
    slope is below 0, the reward's difference +0.023 [-0.066, 0.106] cannot tell and asks about 137 seeds; pass@32 of
    the same runs asks about 377 theorems, as docs/claims.md reports."""
    claims = kept_summary(tmp_path, "claims-pilot-20")[1]["claims"]
    up, passn = (claims[n]["comparison"] for n in ("unlikely-uplift-rank", "unlikely-passN"))
    assert up["verdict"] == passn["verdict"] == "cannot tell at this size"
    assert (up["theorems"], up["seeds"], up["theorems_needed"], up["seeds_needed"]) == (78, 6, None, 137)
    assert (passn["theorems"], passn["seeds"], passn["theorems_needed"], passn["seeds_needed"]) == (48, 6, 377, None)
    assert up["a"]["high"] < 0 and round(up["difference"]["mean"], 3) == 0.023
