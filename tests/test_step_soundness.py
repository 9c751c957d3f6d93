"""The step channel is sound: a state with no goals is ``solved`` only when Coq's kernel accepts the proof
(an unguarded ``fix``/``cofix`` is a failed ``kernel`` step, whatever tactic spelling built it), tactics whose
terms Coq does not type-check are refused by ``CoqProver.step`` itself, and a search never stops at a leaf the
final check refuses (library, step API and ``proofrl search``, best-first and MCTS)."""

from __future__ import annotations

import json

import pytest
from conftest import NAT, requires_coq
from search_support import ScriptedPolicy

from proofrl.provers.base import FailureKind, Theorem
from proofrl.rewards.subgoal import softplus, subgoal_reward
from proofrl.search import SearchConfig, load_search_config, refusal, search_one

pytestmark = requires_coq

FALSE_NAT = Theorem("t_false", "Theorem t_false : forall n : nat, n = 0.", NAT)
PLUS = Theorem("plus0", "Theorem plus0 : forall n : nat, n + 0 = n.", NAT)
STREAM = (
    "CoInductive stream : Type := Cons : nat -> stream -> stream.\nCoInductive all0 : stream -> Prop := A0 : forall "
    "s, all0 s -> all0 (Cons 0 s)."
)
HONEST_FIX = ["fix IH 1.", "intros n.", "destruct n.", "reflexivity.", "simpl.", "f_equal.", "apply IH."]


def walk(prover, theorem, tactics):
    """Step ``tactics`` in order; returns (the last state before the last step, the last StepResult)."""
    st = prover.start(theorem)
    r = None
    for tac in tactics:
        before = st
        r = prover.step(st, tac)
        if not r.ok:
            return before, r
        st = r.state
    return before, r


@pytest.mark.parametrize(
    "tactics",
    [
        ["fix IH 1.", "apply IH."],
        ["fix IH 1.", "intros n.", "apply IH."],
        ["refine (fix f n := _).", "apply f."],
        ["try (fix IH 1; apply IH)."],
        ["do 1 (fix IH 1); apply IH."],
        ["fix IH 1; intros n; solve [apply IH | reflexivity]."],
    ],
    ids=["fix-apply", "fix-intros-apply", "refine-fix", "try", "do-seq", "solve"],
)
def test_an_unguarded_fix_is_a_kernel_failure_and_earns_nothing(coq, tactics):
    before, r = walk(coq, FALSE_NAT, tactics)
    assert not r.ok and r.failure.kind is FailureKind.KERNEL, r
    assert "ill-formed" in r.failure.message or "guard" in r.failure.message.lower(), r.failure.message
    assert subgoal_reward(before, r) == 0.0
    # the state before the refused step is still usable in the same session
    again = coq.step(before, "idtac.")
    assert again.ok and not again.state.solved


PAIR = Theorem("pair", "Theorem pair : forall n : nat, n + 0 = n /\\ True.", NAT)


@pytest.mark.parametrize(
    "tactics",
    [
        ["fix IH 1.", "intros n.", "split.", "apply (proj1 (IH n))."],
        ["fix IH 1.", "intros n.", "split.", "1: {", "apply (proj1 (IH n))."],
        ["fix IH 1.", "intros n.", "split.", "all: [> apply (proj1 (IH n)) | idtac]."],
    ],
    ids=["close-one-of-two", "inside-a-focus-block", "dispatch"],
)
def test_a_step_that_closes_a_goal_with_an_unguarded_call_while_others_remain_earns_nothing(coq, tactics):
    """No ``Qed`` can be asked while a goal is left, yet closing one goal earns softplus(1): Coq's ``Guarded.``,
    which held before the step and fails after it, makes the step a ``kernel`` failure."""
    before, r = walk(coq, PAIR, tactics)
    assert not r.ok and r.failure.kind is FailureKind.KERNEL, r
    assert subgoal_reward(before, r) == 0.0
    assert coq.step(before, "idtac.").ok  # the session went back to the state before the step


TWO = Theorem("two", "Theorem two : (forall n : nat, n = 0) /\\ (forall n : nat, n + 0 = n).", NAT)


@pytest.mark.parametrize(
    "theorem, tactics",
    [
        # poisoned before: another goal's unfinished ``fix`` keeps ``Guarded.`` failing, hiding the illegal call
        (TWO, ["split.", "2: fix IH 1.", "1: fix IH 1.", "1: intros n.", "1: exact (IH n)."]),
        (TWO, ["split.", "2: fix IH 1.", "1: fix IH 1.", "1: intros n.", "2: idtac.", "1: apply IH."]),
        # laundered: the illegal call is made by a step that also opens a goal; the next step closes that goal
        (PAIR, ["fix IH 1.", "intros n.", "split.", "1: refine (eq_trans (proj1 (IH n)) _).", "1: reflexivity."]),
        (PAIR, ["fix IH 1.", "intros n.", "split.", "1: refine (eq_trans (proj1 (IH n)) _).", "2: exact I."]),
    ],
    ids=["poisoned-exact", "poisoned-apply", "laundered-close-it", "laundered-close-another"],
)
def test_a_closing_step_earns_nothing_while_the_term_holds_an_unguarded_call_however_it_got_there(
    coq, theorem, tactics
):
    """The guard is asked on the term as it stands after the step, with every other goal given its
    abstractions (``repeat intro`` in a scratch state): what another goal still owes cannot hide an illegal call,
    and a call made by a step that closed nothing is caught at the first step that closes a goal."""
    before, r = walk(coq, theorem, tactics)
    assert not r.ok and r.failure.kind is FailureKind.KERNEL, r
    assert "ill-formed" in r.failure.message, r.failure.message
    assert subgoal_reward(before, r) == 0.0
    assert coq.step(before, "idtac.").ok


@pytest.mark.parametrize(
    "header, statement, tactics, axiom",
    [
        ("Require Import Coq.Logic.Classical.", "Theorem c : forall P : Prop, ~~P -> P.", ["apply NNPP."], "classic"),
        ("Axiom cheat : False.", "Theorem c : 1 = 2.", ["destruct cheat."], "cheat"),
        ("Lemma l : False. Admitted.", "Theorem c : 1 = 2.", ["case l."], "l"),
        (
            "Require Import Coq.Program.Equality.",
            "Theorem c : forall (x : nat) (p q : x = x), p = q.",
            ["intros x p q.", "dependent destruction p.", "dependent destruction q.", "reflexivity."],
            "eq_rect_eq",
        ),
    ],
    ids=["classical", "header-axiom", "admitted-lemma", "dependent-destruction"],
)
def test_a_step_that_ends_the_proof_is_paid_only_if_the_whole_judge_accepts_it(header, statement, tactics, axiom):
    """``Qed`` accepts these; the assumption audit does not. The step that ends the proof is judged as ``check``
    judges the proof it completes, and both refuse."""
    from proofrl.provers.coq import CoqProver

    th = Theorem("c", statement, header)
    p = CoqProver(header)
    try:
        before, r = walk(p, th, tactics)
        assert not r.ok and r.failure.kind is FailureKind.KERNEL, r
        assert "axiom:" in r.failure.message and axiom in r.failure.message, r.failure.message
        assert subgoal_reward(before, r) == 0.0
        assert p.step(before, "idtac.").ok
        v = p.check(th, "\n".join(tactics))
        assert not v.valid and any(axiom in reason for reason in v.reasons), v
    finally:
        p.close()


@pytest.mark.parametrize(
    "tactics, axiom",
    [
        (["intros.", "split.", "1: apply cheat."], "cheat"),
        (["intros.", "split.", "1: exact magic."], "cheat"),  # a notation hides the axiom's name
        (["intros.", "split.", "1: refine (eq_trans (cheat _) _).", "1: reflexivity."], "cheat"),  # laundered
        (["intros.", "split.", "2: apply NNPP; intro H; apply H; exact I.", "1: lia."], "classic"),
    ],
    ids=["apply", "notation", "laundered", "classical"],
)
def test_a_step_that_closes_a_goal_with_an_axiom_while_others_remain_earns_nothing(tactics, axiom):
    """The partial term's assumptions are read name by name (``Show Proof`` under ``Printing All``) and judged
    by origin: a goal closed by an axiom is refused when it is closed, not only when the proof ends."""
    from proofrl.provers.coq import CoqProver

    header = (
        NAT
        + "\nRequire Import Lia Coq.Logic.Classical.\nAxiom cheat : forall P : Prop, P.\nNotation magic := (cheat _)."
    )
    th = Theorem("x", "Theorem x : forall n m : nat, n + m = m + n /\\ True.", header)
    p = CoqProver(header)
    try:
        before, r = walk(p, th, tactics)
        assert not r.ok and r.failure.kind is FailureKind.KERNEL and f"axiom: {axiom}" in r.failure.message, r
        assert subgoal_reward(before, r) == 0.0
        assert p.step(before, "idtac.").ok
        _, honest = walk(p, th, ["intros.", "split.", "1: lia.", "exact I."])
        assert honest.ok and honest.state.solved
    finally:
        p.close()


def test_honest_steps_that_close_a_goal_inside_a_fix_stand(coq):
    _, r = walk(
        coq,
        PAIR,
        [
            "fix IH 1.",
            "intros n.",
            "split.",
            "2: exact I.",
            "1: destruct n.",
            "reflexivity.",
            "simpl.",
            "f_equal.",
            "apply (proj1 (IH n)).",
        ],
    )
    assert r.ok and r.state.solved
    _, r = walk(coq, PAIR, ["fix IH 1.", "intros n.", "split.", "2: exact I.", "lia."])
    assert r.ok and r.state.solved
    # Guarded fails just after ``fix IH 1.`` ("Not enough abstractions"): closing another goal then is no fault
    th = Theorem("tp", "Theorem tp : True /\\ forall n : nat, n + 0 = n.", NAT)
    _, r = walk(
        coq,
        th,
        [
            "split.",
            "2: fix IH 1.",
            "1: exact I.",
            "intros n.",
            "destruct n.",
            "reflexivity.",
            "simpl.",
            "f_equal.",
            "apply IH.",
        ],
    )
    assert r.ok and r.state.solved


def test_a_whole_unguarded_fix_term_is_refused_by_elaboration(coq):
    """A complete ``fix`` term is guard-checked when Coq elaborates it: an ordinary ``error``, never solved."""
    _, r = walk(coq, FALSE_NAT, ["refine (fix f (n : nat) : n = 0 := f n)."])
    assert not r.ok and r.failure.kind is FailureKind.ERROR and "ill-formed" in r.failure.message


def test_a_guarded_fix_proof_closes_and_earns_its_reward(coq):
    before, r = walk(coq, PLUS, HONEST_FIX)
    assert r.ok and r.state.solved
    assert subgoal_reward(before, r) == pytest.approx(softplus(1.0))  # ≈ 1.313: the closing step's reward
    assert coq.final_check(PLUS, HONEST_FIX).valid
    _, r = walk(coq, PLUS, ["induction n.", "reflexivity.", "simpl.", "rewrite IHn.", "reflexivity."])
    assert r.ok and r.state.solved


def test_cofix_on_a_coinductive_goal():
    from proofrl.provers.coq import CoqProver

    th = Theorem("zeros", "Theorem zeros : forall s, all0 s -> all0 (Cons 0 s).", STREAM)
    th2 = Theorem("any0", "Theorem any0 : forall s : stream, all0 s.", STREAM)
    prover = CoqProver(STREAM)
    try:
        _, r = walk(prover, th2, ["cofix f.", "exact f."])
        assert not r.ok and r.failure.kind is FailureKind.KERNEL, r
        _, r = walk(prover, th2, ["cofix f.", "intros s.", "apply f."])
        assert not r.ok and r.failure.kind is FailureKind.KERNEL, r
        _, r = walk(prover, th, ["cofix f.", "intros s h.", "apply A0.", "exact h."])  # guarded (and needs no f)
        assert r.ok and r.state.solved
    finally:
        prover.close()


def test_a_fix_hidden_in_a_header_tactic_and_an_unchecked_term_are_caught_by_the_kernel_not_by_name():
    """The step's text names neither ``fix`` nor ``*_no_check``: only Coq's ``Qed`` can tell."""
    from proofrl.provers.coq import CoqProver

    header = NAT + "\nLtac loop_on := fix IH 1; assumption.\nLtac trust_me := exact_no_check I."
    prover = CoqProver(header)
    try:
        _, r = walk(prover, Theorem("f", "Theorem f : forall n : nat, n = 0.", header), ["loop_on."])
        assert not r.ok and r.failure.kind is FailureKind.KERNEL, r
        _, r = walk(prover, Theorem("g", "Theorem g : False.", header), ["trust_me."])
        assert not r.ok and r.failure.kind is FailureKind.KERNEL, r
        _, r = walk(prover, Theorem("h", "Theorem h : True.", header), ["trust_me."])  # well typed after all
        assert r.ok and r.state.solved
    finally:
        prover.close()


@pytest.mark.parametrize(
    "tactic",
    [
        "exact_no_check I.",
        "vm_cast_no_check (eq_refl 0).",
        "native_cast_no_check I.",
        "change_no_check (0 = 0).",
        "idtac; exact_no_check I.",
        "try exact_no_check I.",
        "first [exact_no_check I | idtac].",
    ],
)
def test_tactics_that_skip_the_type_check_are_refused_by_step_itself(coq, tactic):
    st = coq.start(Theorem("tt", "Theorem tt : True.", NAT))
    r = coq.step(st, tactic)
    assert not r.ok and r.failure.kind is FailureKind.FORBIDDEN and "_no_check" in r.failure.message
    assert refusal(tactic, "coq") == r.failure.message  # the search asks the same question, without a prover call


def test_a_name_in_a_string_is_not_a_use(coq):
    st = coq.start(Theorem("tt", "Theorem tt : True.", NAT))
    r = coq.step(st, 'idtac "exact_no_check"; exact I.')
    assert r.ok and r.state.solved


# -- the search ---------------------------------------------------------------------------------------------

CHEAT_HEADER = NAT + "\nAxiom cheat : forall P : Prop, P."
PLUS_CHEAT = Theorem("plus0", "Theorem plus0 : forall n : nat, n + 0 = n.", CHEAT_HEADER)


def mcts(**kw) -> SearchConfig:
    return SearchConfig(**{"algorithm": "mcts", "tactic_timeout": 5.0, "max_steps": 16, **kw})


def bfs(**kw) -> SearchConfig:
    return load_search_config("reprover", **{"tactic_timeout": 5.0, "width": 4, "max_steps": 16, "seconds": 60.0, **kw})


@pytest.mark.parametrize("config", [mcts(), bfs()], ids=["mcts", "best-first"])
def test_search_offered_an_unguarded_fix_beside_the_honest_proof_proves_honestly(coq, config):
    pol = ScriptedPolicy([("IH :", ["apply IH."]), ("⊢ forall n", ["fix IH 1.", "intros n."]), ("n + 0 = n", ["lia."])])
    r = search_one(PLUS, coq, pol, config)
    assert r.status == "proved" and r.proof.split() == ["intros", "n.", "lia."], (r.status, r.proof, r.reason)
    (cheat,) = [e for e in r.tree.edges if e.tactic == "apply IH."]
    assert cheat.failure is not None and cheat.failure.kind == "kernel"


def _search_offered_the_cheat_first(config):
    """``plus0`` searched under the header's axiom, the policy offering ``apply cheat.`` before the honest steps."""
    from proofrl.provers.coq import CoqProver

    pol = ScriptedPolicy([("⊢ forall n", ["apply cheat.", "intros n."]), ("n + 0 = n", ["apply cheat.", "lia."])])
    prover = CoqProver(CHEAT_HEADER)
    try:
        return search_one(PLUS_CHEAT, prover, pol, config)
    finally:
        prover.close()


@pytest.mark.parametrize("config", [mcts(), bfs()], ids=["mcts", "best-first"])
def test_a_cheat_that_ends_the_proof_is_a_kernel_edge_and_the_search_proves_honestly(config):
    """Without the mutation, the step that ends the proof with the header's axiom is refused by the step's
    own judge: no leaf is left for the final check to refuse."""
    r = _search_offered_the_cheat_first(config)
    assert r.status == "proved" and r.proof.split() == ["intros", "n.", "lia."], (r.status, r.proof, r.reason)
    assert r.refused == 0
    tree = r.tree_json()
    assert not any(n["unsound"] for n in tree["nodes"])
    assert any(e["tactic"] == "apply cheat." and e["failure"]["kind"] == "kernel" for e in tree["edges"])


@pytest.mark.parametrize("config", [mcts(), bfs()], ids=["mcts", "best-first"])
def test_a_leaf_the_final_check_refuses_is_dead_and_the_search_goes_on(config, blind_session):
    """``apply cheat.`` closes the goal in the session (the header's axiom), and the policy likes it best;
    only the fresh final check refuses it. The search marks that leaf unsound and finds the honest proof."""
    r = _search_offered_the_cheat_first(config)
    assert r.status == "proved" and r.proof.split() == ["intros", "n.", "lia."], (r.status, r.proof, r.reason)
    assert r.refused >= 1 and r.line()["refused_proofs"] == r.refused
    tree = r.tree_json()
    dead = [n for n in tree["nodes"] if n["unsound"]]
    assert dead and all(n["dead"] and not n["solved"] and not n["closes"] and "cheat" in n["unsound"] for n in dead)
    assert all(n["tactics"][-1] == "apply cheat." for n in dead)
    assert tree["nodes"][tree["root"]]["solved"]


def test_unsound_only_when_the_budget_ends_without_a_sound_proof(blind_session):
    from proofrl.provers.coq import CoqProver

    pol = ScriptedPolicy([("⊢ forall n", ["apply cheat.", "intros n."]), ("n + 0 = n", ["apply cheat."])])
    prover = CoqProver(CHEAT_HEADER)
    try:
        r = search_one(PLUS_CHEAT, prover, pol, bfs())
    finally:
        prover.close()
    assert r.status == "unsound" and r.refused == 2 and "2 proof(s) refused" in r.reason
    assert r.verdict is not None and not r.verdict.valid
    assert [n.state.tactics for n in r.tree.nodes if n.unsound] == [("apply cheat.",), ("intros n.", "apply cheat.")]


def test_mcts_an_unguarded_call_inside_a_focus_block_is_a_kernel_edge(coq):
    """MCTS's AND node: goal 1 in ``1: {``, where a recursive call that breaks the guard is refused at its step
    (``Guarded.``), and the search proves honestly."""
    table = [
        ("IH : forall n : nat, n + 0 = n /\\ True\n⊢ forall", ["intros n."]),
        ("⊢ forall", ["fix IH 1.", "intros n."]),
        ("⊢ n + 0 = n /\\", ["split."]),
        ("⊢ n + 0 = n", ["apply (proj1 (IH n)).", "lia."]),
        ("⊢ True", ["exact I."]),
    ]
    r = search_one(PAIR, coq, ScriptedPolicy(table), mcts(max_steps=40))
    assert r.status == "proved" and r.refused == 0, (r.status, r.proof, r.reason)
    kernel = [e for e in r.tree.edges if e.failure is not None and e.failure.kind == "kernel"]
    assert kernel and all(e.tactic == "apply (proj1 (IH n))." for e in kernel)


def test_mcts_a_cheat_inside_a_focus_block_only_the_final_check_sees_marks_the_proofs_leaves_and_search_goes_on(
    blind_session,
):
    """The header's axiom closes goal 1 inside ``1: {`` (seen by no step once the session is blinded); the final
    check refuses the proof, both of its closing leaves are marked unsound (the culprit is unknown: ``exact I.``
    goes too), so that AND node is dead and MCTS proves through the other branch."""
    from proofrl.provers.coq import CoqProver

    th = Theorem("pair", PAIR.statement, CHEAT_HEADER)
    table = [
        ("⊢ forall", ["intros n.", "intros m."]),
        ("⊢ n + 0 = n /\\", ["split."]),
        ("⊢ m + 0 = m /\\", ["split."]),
        ("⊢ n + 0 = n", ["apply cheat.", "lia."]),
        ("⊢ m + 0 = m", ["lia."]),
        ("⊢ True", ["exact I."]),
    ]
    prover = CoqProver(CHEAT_HEADER)
    try:
        r = search_one(th, prover, ScriptedPolicy(table), mcts(max_steps=40))
    finally:
        prover.close()
    assert r.status == "proved" and r.refused == 1, (r.status, r.proof, r.reason)
    assert "cheat" not in r.proof and "intros m." in r.proof
    dead = sorted(n.state.tactics[-1] for n in r.tree.nodes if n.unsound)
    assert dead == ["apply cheat.", "exact I."]


def _scripted_app(table):
    """An OpenAI-compatible chat endpoint that answers from ``table`` (the state text is in the prompt)."""
    from fastapi import FastAPI

    from proofrl.policy.tactic import tactic_prompt  # noqa: F401 - the prompt holds the state text

    app = FastAPI()
    pol = ScriptedPolicy(table)

    @app.post("/v1/chat/completions")
    def chat(body: dict):
        (msg,) = [m for m in body["messages"] if m["role"] == "user"]
        props = pol.propose(msg["content"], body.get("n", 1)) or []
        props = (props * body.get("n", 1))[: body.get("n", 1)]
        choices = [
            {
                "index": j,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": p.tactic},
                "logprobs": {"content": [{"token": p.tactic, "logprob": p.logprob_sum, "top_logprobs": []}]},
            }
            for j, p in enumerate(props)
        ]
        return {"id": "c", "object": "chat.completion", "model": body["model"], "choices": choices}

    return app


@pytest.mark.parametrize("algorithm", ["best-first", "mcts"])
def test_proofrl_search_with_a_cheating_policy_proves_honestly_and_keeps_the_dead_leaf(
    tmp_path, algorithm, blind_session
):
    from test_policy_generation import serve
    from typer.testing import CliRunner

    from proofrl.cli import app

    table = [
        ("IH :", ["apply IH."]),
        ("⊢ forall n", ["fix IH 1.", "apply cheat.", "intros n."]),
        ("n + 0 = n", ["apply cheat.", "lia."]),
    ]
    url, stop = serve(_scripted_app(table))
    problems = tmp_path / "p.jsonl"
    problems.write_text(
        json.dumps({"name": "plus0", "header": CHEAT_HEADER, "formal_statement": PLUS_CHEAT.statement}) + "\n"
    )
    try:
        r = CliRunner().invoke(
            app,
            [
                "search",
                str(problems),
                "--algorithm",
                algorithm,
                "--policy",
                f"openai-chat:{url}",
                "--model",
                "scripted",
                "--out",
                str(tmp_path / "out"),
                "--width",
                "3",
                "--expansions",
                "12",
                "--max-steps",
                "16",
                "--threads",
                "1",
            ],
        )
    finally:
        stop()
    assert r.exit_code == 0, r.output
    (line,) = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert line["status"] == "proved" and line["proof"].split() == ["intros", "n.", "lia."], line
    assert line["verdict"]["status"] == "valid" and line["refused_proofs"] >= 1
    tree = json.loads((tmp_path / "out" / "trees" / "plus0.json").read_text())
    assert any(n["unsound"] and "cheat" in n["unsound"] and n["dead"] for n in tree["nodes"])
    assert any(e["tactic"] == "apply IH." and e["failure"]["kind"] == "kernel" for e in tree["edges"])


# -- Lean: what the end of a declaration checks, in tactic mode ------------------------------------------------


@pytest.mark.parametrize(
    "name, statement, tactic",
    [
        ("self_proof_apply_check", "theorem ex : False :=", "apply ex"),
        ("self_proof_exact_check", "theorem ex : False :=", "exact ex"),
        (
            "self_proof_rw",
            "set_option pp.fvars.anonymous false in theorem self_application : 1 = 0 := by",
            "rw [self_application]",
        ),
    ],
)
def test_lean_a_proof_by_itself_closes_no_goal_and_earns_nothing(name, statement, tactic):
    """Real Lean (recorded): in tactic mode the theorem's own name is a free variable; the REPL's check of the
    finished term says ``Error: kernel type check failed`` (command mode: "fail to show termination")."""
    from lean_replay_support import TRANSCRIPTS, replay_config

    if not TRANSCRIPTS.is_dir():
        pytest.skip(f"no transcripts at {TRANSCRIPTS}")
    from proofrl.provers.lean import LeanProver

    prover = LeanProver(replay_config(TRANSCRIPTS / f"{name}.in", "--start", "2"))
    try:
        s0 = prover.start(Theorem("ex", statement, "", "lean"))
        r = prover.step(s0, tactic)
    finally:
        prover.close()
    assert not r.ok and r.failure.kind is FailureKind.KERNEL and "kernel type check failed" in r.failure.message
    assert subgoal_reward(s0, r) == 0.0


def test_a_section_hypothesis_closes_a_goal_as_a_binder_not_an_axiom():
    """Stated inside the header's section, the lemma may close goals with the section's hypotheses: they are
    binders once the judge closes the section, so neither the closing step nor the end is refused."""
    from proofrl.provers.coq import CoqProver

    header = "Section S.\nVariable n : nat.\nHypothesis H : n = 0."
    th = Theorem("k", "Lemma k : n = 0 /\\ True.", header)
    p = CoqProver(header)
    try:
        _, r = walk(p, th, ["split.", "1: exact H."])
        assert r.ok and r.state.goal_count == 1, r
        _, r = walk(p, th, ["split.", "1: exact H.", "exact I."])
        assert r.ok and r.state.solved, r
        assert p.check(th, "split. exact H. exact I.").valid
    finally:
        p.close()
