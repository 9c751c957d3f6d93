"""Tactic metrics and the group runner over real Coq: Prec@k / 0-precision counting, and the issue's bad inputs
— a tactic that loops (timeout, reward 0, the group goes on), a state whose session died (re-reached by replay),
forbidden tactics (reward 0, never valid) — plus `proofrl eval tactics` end to end on a tiny model."""

from __future__ import annotations

import json

import pytest
from conftest import NAT
from typer.testing import CliRunner

from proofrl.eval.tactics import score_states, summarize
from proofrl.provers.base import Theorem
from proofrl.rollout.tactics import GroupRun, StatePoint, TacticRun, run_group, state_points
from proofrl.train.step_grpo import step_rewards

PLUS = Theorem("plus_0", "Theorem plus_0 : forall n : nat, n + 0 = n.", NAT)
AT_N = StatePoint(PLUS, ("intros n.",), "n : nat\n⊢ n + 0 = n")


def _group(name: str, valid: dict[str, bool], reached: bool = True) -> GroupRun:
    p = StatePoint(Theorem(name, f"Theorem {name} : True.", ""), (), "⊢ True")
    g = GroupRun(p, object() if reached else None, error="" if reached else "state not reached: x")  # type: ignore[arg-type]
    g.runs = {t: TacticRun(t or "", ok, None if ok else "error") for t, ok in valid.items()}
    return g


def test_prec_at_k_counts_every_drawn_sample_and_zero_precision_counts_states():
    a = _group("a", {"auto.": True, "bad.": False, None: False, "trivial.": True})
    b = _group("b", {"x.": False, "y.": False})
    c = _group("c", {}, reached=False)  # a state that could not be reached is not scored
    drawn = [
        ["auto.", "auto.", "bad.", None, "trivial.", "bad.", "bad.", "bad."],  # 3 of 8 valid (auto. twice)
        ["x.", "y.", "x.", "x.", "y.", "y.", "x.", "x."],  # none valid
        ["z."] * 8,
    ]
    m = summarize("m", score_states([a, b, c], drawn, 8), 8)
    assert m.states == 2 and m.errors == 1
    assert m.prec_at_k == pytest.approx((3 / 8 + 0 / 8) / 2)
    assert m.zero_precision == pytest.approx(1 / 2)
    lengths = [len(t) for t in drawn[0] + drawn[1] if t]  # a cut sample (None) has no length
    assert m.mean_length == pytest.approx(sum(lengths) / len(lengths))
    assert m.failures == {"error": 5 + 8}


def test_state_points_replay_paths_and_skip_bullets():
    def rec(step: int, tac: str, structural: bool = False) -> dict:
        return {
            "theorem": "t",
            "statement": "S",
            "header": "",
            "module": "M",
            "step": step,
            "state_before": f"s{step}",
            "tactic": tac,
            "structural": structural,
        }

    pts = state_points([rec(0, "split."), rec(1, "-", True), rec(2, "auto."), rec(4, "after a gap.")])
    assert [(p.text, p.path) for p in pts] == [("s0", ()), ("s2", ("split.", "-"))]


def test_looping_forbidden_and_dead_session_in_one_group(coq):
    """One group at `n + 0 = n`: a looping tactic times out, cheats are refused, the session is killed mid-group
    and the next tactic still runs (the state re-reached by replaying `intros n.`)."""

    class KillsAfterLoop:  # the real prover; after the looping tactic, its coqidetop process is killed
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def step(self, state, tactic, *, timeout=None):
            r = self.inner.step(state, tactic, timeout=timeout)
            if "loop" in tactic:
                self.inner.kill()
            return r

    loop = "let rec loop := (idtac; loop) in loop."
    tactics = [loop, "admit.", "give_up.", "exact_no_check eq_refl.", "lia.", "exact 0.", None, "lia."]
    g = run_group(KillsAfterLoop(coq), AT_N, tactics, timeout=1.0)
    assert g.before is not None and not g.error
    assert g.of(loop).failure == "timeout" and not g.of(loop).valid
    for cheat in ("admit.", "give_up.", "exact_no_check eq_refl."):
        assert g.of(cheat).failure == "forbidden" and not g.of(cheat).valid
    assert g.of("lia.").valid and g.of("lia.").result.state.solved  # after the kill: replayed, then proved
    assert g.replays >= 1
    assert g.of("exact 0.").failure == "error" and g.of(None).failure == "parse_error"
    rewards = step_rewards(g, tactics)
    assert rewards[0] == 0.0 and rewards[1:4] == [0.0] * 3 and rewards[5:7] == [0.0, 0.0]
    assert rewards[4] == rewards[7] > 1.0  # softplus(1 − 0)
    m = summarize("m", score_states([g], [tactics], 8), 8)
    assert m.prec_at_k == pytest.approx(2 / 8)  # lia. drawn twice; nothing forbidden counted


def test_an_unreachable_state_is_an_error_not_an_exception(coq):
    g = run_group(coq, StatePoint(PLUS, ("intros n.", "no_such_tactic."), "x"), ["lia."], timeout=2.0)
    assert g.before is None and "not reached" in g.error and not g.runs


def test_eval_tactics_cli_writes_a_report(tmp_path):
    from proofrl.cli import app
    from proofrl.policy.tactic import train_tiny_tactic_model

    recs = [
        {
            "theorem": "plus_0",
            "statement": PLUS.statement,
            "header": NAT,
            "module": "T",
            "split": "held-out",
            "step": 0,
            "state_before": "⊢ forall n : nat, n + 0 = n",
            "tactic": "intros n.",
            "structural": False,
        },
        {
            "theorem": "plus_0",
            "statement": PLUS.statement,
            "header": NAT,
            "module": "T",
            "split": "held-out",
            "step": 1,
            "state_before": AT_N.text,
            "tactic": "lia.",
            "structural": False,
        },
    ]
    states = tmp_path / "states.jsonl"
    states.write_text("".join(json.dumps(r) + "\n" for r in recs))
    model = train_tiny_tactic_model(
        recs * 4, tmp_path / "m", epochs=1, model={"hidden": 32, "layers": 1, "heads": 2, "vocab_size": 300}
    )
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app,
        [
            "eval",
            "tactics",
            "--model",
            str(model),
            "--states",
            str(states),
            "-k",
            "4",
            "--out",
            str(out),
            "--theorems",
            "1",
            "--expansions",
            "2",
            "--workers",
            "1",
        ],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())["m"]
    assert summary["states"] == 2 and summary["k"] == 4 and 0.0 <= summary["prec_at_k"] <= 1.0
    assert summary["proving"]["theorems"] == 1
    assert (out / "prec.png").stat().st_size > 0 and "Prec@4" in (out / "report.md").read_text()
    bad = CliRunner().invoke(app, ["eval", "tactics", "--model", str(model), "--states", str(tmp_path / "none.jsonl")])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
