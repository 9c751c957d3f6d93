"""Attacks on the Lean judge: ways a policy could get ``valid`` for a statement it did not prove.

Four classes, one section each:

1. commands, attributes or options hidden in the proof text, or text Lean reads otherwise than our rules
   (comments, raw strings, ``«»`` identifiers);
2. axioms: the allowlist matches exact full names, and a user ``axiom`` is refused;
3. the declaration audited is the statement's own (its name, once; its text, literals included);
4. notations, instances or options that change the statement's meaning, before it or in the header.

Where Lean must answer, the answer is SYNTHETIC and says what Lean would do with that text (reasoned from
Lean's source, not recorded: the recordings contain neither ``#print axioms`` nor these attacks). Each such
test shows the hole end to end: with rules that let the text through, the prover says ``valid``. Once the
rules refuse the text before Lean runs, the replay is never asked.

Every attack Lean answers is judged in each REPL generation's shapes (the ``shape`` fixture): v4.33 named,
v4.9 named (no ``proofStatus``, ``endPos: null``, ``'sorry'``, one newline between answers) and v4.9 detected.
Section 5 holds the tactic-mode attacks that differ by generation.
"""

from __future__ import annotations

import json

import pytest
from lean_replay_support import (
    LEGACY_TOOLCHAIN,
    TRANSCRIPTS,
    legacy_shape,
    needs_transcripts,
    recorded,
    replay_config,
    synthetic_axioms,
    write_transcript,
)

from proofrl.provers.base import FailureKind, Status, Theorem
from proofrl.provers.lean import LeanProver, rules
from proofrl.provers.lean.config import DEFAULT_AXIOMS, LeanConfig
from proofrl.provers.lean.header import split_header
from proofrl.provers.lean.models import ReplMessage
from proofrl.provers.lean.replay import requests_of

FALSE = Theorem("t", "theorem t : 1 = 2 := by", "", "lean")  # false: every `valid` for it is a hole
CHEAT_HEADER = "axiom cheat : False"  # a (trusted) header that declares an axiom; only the audit stops its use


SHAPES = {"v4.33": ("v4.33.0", False), "v4.9": (LEGACY_TOOLCHAIN, True), "v4.9-detected": (None, True)}
"""(toolchain named in the config or None to detect, answers in the legacy shapes)"""


@pytest.fixture(params=list(SHAPES))
def shape(request) -> tuple[str | None, bool]:
    return SHAPES[request.param]


def lean_accepts(
    tmp_path,
    code: str,
    *,
    name: str = "t",
    header: str = "",
    audit: dict | None = None,
    tag: str = "ok",
    shape: tuple[str | None, bool] = SHAPES["v4.33"],
) -> LeanProver:
    """A prover whose (SYNTHETIC) Lean elaborates ``code`` without a message and answers the audit with
    ``audit`` (default: no axioms), which is what real Lean does for the attacks below once it runs them;
    ``shape`` picks the REPL generation the answers are shaped and read as."""
    version, legacy = shape
    ex = []
    if header:
        ex.append(({"cmd": header}, {"env": 0}))
    body = {"cmd": code, "env": 0} if header else {"cmd": code}
    env = 1 if header else 0
    ex.append((body, {"env": env}))
    ex.append(({"cmd": f"#print axioms {name}", "env": env}, audit or synthetic_axioms(name, [], env + 1)))
    if legacy:
        ex = [(q, legacy_shape(a)) for q, a in ex]
    inp = write_transcript(tmp_path, tag, ex, framing="\n" if legacy else "\n\n")
    return LeanProver(replay_config(inp, version=version), header)


def no_lean(tmp_path, header: str = "") -> LeanProver:
    """A prover whose REPL answers nothing but the header: a verdict proves the body never reached Lean."""
    ex = [({"cmd": header}, {"env": 0})] if header else []
    return LeanProver(replay_config(write_transcript(tmp_path, "silent", ex)), header)


def refused(v, prefix: str) -> bool:
    return v.status is Status.REJECTED and any(r.startswith(prefix) for r in v.reasons)


# == 1. commands hidden in proof text; text Lean reads otherwise ================================================
def test_statement_in_a_doc_comment_does_not_count(tmp_path, shape) -> None:
    # `/--` opens a doc comment whose body starts after the third character, so `/--/` does not close it:
    # Lean sees one comment, then `theorem t : True`. Read as `/-` + `-/`, the false statement was "found".
    code = "/--/ theorem t : 1 = 2 := by -/\ntheorem t : True := trivial"
    v = lean_accepts(tmp_path, shape=shape, code=code).check(FALSE, code)
    assert v.status is Status.REJECTED and v.reasons == ("statement changed",)


def test_comment_nesting_cannot_hide_an_instance(tmp_path, shape) -> None:
    # Lean consumes the character after `/-` unseen, so `/-/-` opens ONE comment, closed by the first `-/`;
    # `-- -/` is then a line comment. The instance makes `2` mean 1, and `rfl` proves `1 = 2`.
    code = "/-/- -/ instance : OfNat Nat 2 := ⟨1⟩ -- -/\ntheorem t : 1 = 2 := by rfl"
    v = lean_accepts(tmp_path, shape=shape, code=code).check(FALSE, code)
    assert v.reasons == ("statement changed: `instance` before it",)


def test_raw_string_cannot_hide_an_instance(tmp_path, shape) -> None:
    # r"\" is a raw string holding one backslash (no escapes in raw strings), so the instance is code.
    code = 'example : r"\\" = "\\\\" := rfl\ninstance : OfNat Nat 2 := ⟨1⟩\n-- "\ntheorem t : 1 = 2 := by rfl'
    v = lean_accepts(tmp_path, shape=shape, code=code).check(FALSE, code)
    assert v.reasons == ("statement changed: `instance` before it",)


def test_statement_in_an_escaped_identifier_does_not_count(tmp_path, shape) -> None:
    # `«...»` is one identifier to Lean, whatever it holds
    code = "theorem «x theorem t : 1 = 2 := by » : True := trivial\ntheorem t : True := trivial"
    v = lean_accepts(tmp_path, shape=shape, code=code).check(FALSE, code)
    assert v.reasons == ("statement changed",)


@pytest.mark.parametrize(
    "code, problem",
    [
        ('theorem t : 1 = 2 := by\n  have : s!"{1}" = "1" := rfl\n  rfl', "`{` in a string"),
        ("theorem t : 1 = 2 := by\n  have := `(tactic| rfl)\n  rfl", "a syntax quotation"),
        ("theorem t : 1 = 2 := by\n  exact (fun x => x) <--1\n  rfl", "`<--`"),
    ],
)
def test_text_lean_could_read_otherwise_is_refused(tmp_path, code, problem) -> None:
    v = no_lean(tmp_path).check(FALSE, code)
    assert v.status is Status.REJECTED and v.reasons[0].startswith("unsupported: ") and problem in v.reasons[0]


HIDDEN = [
    ('run_cmd Lean.logInfo "hi"', "run_cmd"),
    ("#eval (1 : Nat)", "#eval"),
    ("#exit", "#exit"),
    ('elab "cheat" : tactic => pure ()', "elab"),
    ('macro "cheat" : tactic => pure ()', "macro"),
    ('syntax "cheat" : tactic', "syntax"),
    ('notation "two" => 1', "notation"),
    ("attribute [simp] Nat.add_comm", "attribute"),
    ("@[implemented_by Nat.add] def f : Nat → Nat → Nat := Nat.mul", "@[implemented_by]"),
    ("unsafe def f : Nat := 0", "unsafe"),
    ("opaque f : Nat", "opaque"),
    ("axiom propext' : False", "axiom"),
    ("namespace X", "namespace"),
    ("section", "section"),
    ("initialize pure ()", "initialize"),
    ("instance : OfNat Nat 2 := ⟨1⟩", "instance"),
    ("set_option debug.skipKernelTC true", "set_option debug.skipKernelTC"),
]


@pytest.mark.parametrize("command, word", HIDDEN, ids=[w for _, w in HIDDEN])
@pytest.mark.parametrize("form", ["tail", "file"])
def test_commands_after_the_statement_are_refused(tmp_path, command, word, form) -> None:
    proof = f"rfl\n{command}" if form == "tail" else f"theorem t : 1 = 2 := by\n  rfl\n{command}"
    v = no_lean(tmp_path).check(FALSE, proof)
    assert v.status is Status.REJECTED and v.reasons == (f"forbidden: {word}",), v


@pytest.mark.parametrize(
    "tactic, word",
    [
        ("run_tac Lean.Elab.Tactic.evalTactic (← `(tactic| rfl))", "run_tac"),
        ("set_option debug.skipKernelTC true in rfl", "set_option debug.skipKernelTC"),
        ("exact by_elab do return Lean.mkConst ``rfl", "by_elab"),
        ("conv => run_conv pure ()", "run_conv"),
    ],
)
def test_code_running_tactics_are_refused(tmp_path, tactic, word) -> None:
    v = no_lean(tmp_path).check(FALSE, tactic)
    assert v.status is Status.REJECTED and v.reasons[0] in (
        f"forbidden: {word}",
        "unsupported: a syntax quotation `` `( ``",
    )


@pytest.mark.parametrize(
    "tactic, word",
    [
        # a tactic's config term is evaluated while Lean elaborates; with IO it could write forged answers to the
        # REPL's own stdout (the JSON channel), before the audit is even asked
        ("simp (config := unsafeBaseIO (pure {}))", "unsafeBaseIO"),
        ('have := (IO.println "hi" ()).toString\n  rfl', "IO.println"),
        ("open IO in\n  rfl", "IO"),
        ('have := System.FilePath.pathExists "x" ()\n  rfl', "System.FilePath.pathExists"),
        ("exact Lean.ofReduceBool _ _ rfl", "Lean.ofReduceBool"),
        ("decide +native", "native"),
    ],
)
def test_code_evaluated_at_elaboration_cannot_reach_outside(tmp_path, tactic, word) -> None:
    v = no_lean(tmp_path).check(FALSE, tactic)
    assert v.status is Status.REJECTED and v.reasons == (f"forbidden: {word}",), v


def test_print_axioms_hijacked_by_macro_rules_is_refused(tmp_path, shape) -> None:
    # Macros expand before elaborators, so this rule turns the audit into a `#print "..."` of our choosing.
    proof = "exact cheat.elim\nmacro_rules | `(#print axioms t) => `(#print \"'t' does not depend on any axioms\")"
    thm = Theorem("t", "theorem t : 1 = 2 := by", CHEAT_HEADER, "lean")
    code = (
        "theorem t : 1 = 2 := by\n  exact cheat.elim\n  macro_rules | `(#print axioms t) => `(#print \"'t' does not "
        'depend on any axioms")'
    )
    hijacked = {
        "messages": [
            {
                "severity": "info",
                "pos": {"line": 1, "column": 0},
                "endPos": {"line": 1, "column": 6},
                "data": "'t' does not depend on any axioms",
            }
        ],
        "env": 2,
    }
    v = lean_accepts(tmp_path, shape=shape, code=code, header=CHEAT_HEADER, audit=hijacked).check(thm, proof)
    assert v.status is Status.REJECTED and v.reasons[0] in (
        "forbidden: macro_rules",
        "unsupported: a syntax quotation `` `( ``",
    )


def test_guard_msgs_before_the_statement_is_refused(tmp_path) -> None:
    # `#guard_msgs (drop error) in` would swallow the statement's errors
    code = "#guard_msgs (drop error) in\ntheorem t : 1 = 2 := by\n  rfl"
    v = no_lean(tmp_path).check(FALSE, code)
    assert v.reasons == ("statement changed: `#guard_msgs` before it",)


@pytest.mark.parametrize("line", ["frobnicate Nat", "irreducible_def two : Nat := 1"])
def test_only_helpers_start_a_line_before_the_statement(tmp_path, line) -> None:
    # an allowlist: a command we do not know is refused as well as the ones we do
    code = f"lemma h : True := trivial\n{line}\ntheorem t : 1 = 2 := by\n  rfl"
    v = no_lean(tmp_path).check(FALSE, code)
    assert v.status is Status.REJECTED and v.reasons == (f"statement changed: `{line.split()[0]}` before it",)


@pytest.mark.parametrize(
    "code, word",
    [
        ("private theorem t : 1 = 2 := by\n  rfl", "private"),
        ("@[simp]\ntheorem t : 1 = 2 := by\n  rfl", "@[simp]"),
        ("lemma h : True := trivial theorem t : 1 = 2 := by\n  rfl", "trivial"),
    ],
)
def test_the_statement_starts_its_own_command(tmp_path, code, word) -> None:
    v = no_lean(tmp_path).check(FALSE, code)
    assert v.status is Status.REJECTED and v.reasons == (f"statement changed: `{word}` before it",)


@needs_transcripts
def test_tactic_steps_are_screened_too() -> None:
    prover = LeanProver(replay_config(TRANSCRIPTS / "readme.in"))
    s0 = prover.start(Theorem("f", "def f (x : Unit) : Nat := by"))
    r = prover.step(s0, "run_tac pure ()")
    assert (
        r.failure is not None and r.failure.kind is FailureKind.FORBIDDEN and r.failure.message == "forbidden: run_tac"
    )


# == 2. axioms by exact full name ===============================================================================
@pytest.mark.parametrize(
    "name",
    [
        "Classical.choice'",
        "Quot.sound'",
        "propext'",
        "X.Classical.choice",
        "Classical.choice.x",
        "«Classical.choice»",
        "_root_.propext",
        "«propext, Quot.sound»",
        "sorryAx",
        "Lean.ofReduceBool",
        "Lean.trustCompiler",
        "cheat",
    ],
)
def test_axiom_allowlist_is_by_exact_full_name(name) -> None:
    j = rules.judge_axioms((name,), DEFAULT_AXIOMS)
    assert j.status is Status.REJECTED and j.reasons == (f"axiom: {name}",)
    assert rules.judge_axioms(("propext", "Classical.choice", "Quot.sound"), DEFAULT_AXIOMS).status is Status.VALID


def test_audit_list_is_split_by_names_not_by_commas() -> None:
    # Lean prints a name that is not an identifier in «»; one such name is one axiom, commas and all
    assert rules.parse_axioms("'t' depends on axioms: [Classical.choice, «propext, Quot.sound»]") == (
        "Classical.choice",
        "«propext, Quot.sound»",
    )
    assert rules.parse_axioms("'t' depends on axioms: [propext,\n  Quot.sound]") == ("propext", "Quot.sound")


@pytest.mark.parametrize(
    "command",
    [
        "axiom propext : False",
        "axiom Classical.choice' : False",
        "namespace X axiom propext : False end X",
        "axiom _root_.Quot.sound' : False",
    ],
)
def test_user_axioms_in_the_proof_are_refused(tmp_path, command) -> None:
    for proof in (
        f"rfl\n{command}",
        f"theorem t : 1 = 2 := by\n  rfl\n{command}",
        f"{command}\ntheorem t : 1 = 2 := by\n  rfl",
    ):
        v = no_lean(tmp_path).check(FALSE, proof)
        assert v.status is Status.REJECTED and ("axiom" in v.reasons[0] or "namespace" in v.reasons[0]), (proof, v)


# == 3. the audited declaration is the statement's ==============================================================
def _audit(*texts: str) -> dict:
    return {
        "messages": [
            {"severity": "info", "pos": {"line": 1, "column": 0}, "endPos": {"line": 1, "column": 13}, "data": t}
            for t in texts
        ],
        "env": 2,
    }


@pytest.mark.parametrize(
    "answer",
    [
        _audit("'X.t' does not depend on any axioms"),  # `t` resolved to another declaration (a namespace left open)
        _audit("'X.t' does not depend on any axioms", "'t' depends on axioms: [cheat]"),  # `t` is ambiguous (open X)
        _audit("'t' does not depend on any axioms", "'t' depends on axioms: [cheat]"),
        _audit("no axioms here"),
    ],
)
def test_audit_must_be_one_answer_about_the_statement(tmp_path, answer, shape) -> None:
    thm = Theorem("t", "theorem t : 1 = 2 := by", CHEAT_HEADER, "lean")
    code = "theorem t : 1 = 2 := by exact cheat.elim"
    v = lean_accepts(tmp_path, shape=shape, code=code, header=CHEAT_HEADER, audit=answer).check(thm, "exact cheat.elim")
    assert v.status is Status.REJECTED and v.reasons[0].startswith("axiom"), v


def test_audit_rules() -> None:
    info = lambda t: ReplMessage("info", t)  # noqa: E731
    ok = rules.judge_audit((info("'t' depends on axioms: [propext]"),), "t", DEFAULT_AXIOMS)
    assert ok[0].status is Status.VALID and ok[1] == ("propext",)
    assert (
        rules.judge_audit((info("'«my t»' does not depend on any axioms"),), "«my t»", DEFAULT_AXIOMS)[0].status
        is Status.VALID
    )
    assert (
        rules.judge_audit((info("'Foo.t' does not depend on any axioms"),), "_root_.Foo.t", DEFAULT_AXIOMS)[0].status
        is Status.VALID
    )
    priv = rules.judge_audit((info("'_private.0.t' does not depend on any axioms"),), "t", DEFAULT_AXIOMS)
    assert priv[0].status is Status.VALID
    for bad in (
        "'t'' does not depend on any axioms",
        "'X.t' does not depend on any axioms",
        "'t.x' does not depend on any axioms",
        "'_private.0.X.t' does not depend on any axioms",
    ):
        assert rules.judge_audit((info(bad),), "t", DEFAULT_AXIOMS)[0].status is Status.REJECTED, bad
    two = (info("'t' does not depend on any axioms"), info("'t' does not depend on any axioms"))
    assert rules.judge_audit(two, "t", DEFAULT_AXIOMS)[0].reasons == ("axiom audit answered 2 times",)
    # `t` also names `Nat.t` through the header's `open Nat`: Lean answers for both, the statement's is judged
    both = (info("'Nat.t' depends on axioms: [sorryAx]"), info("'t' depends on axioms: [propext]"))
    assert rules.judge_audit(both, "t", DEFAULT_AXIOMS) == (rules.Judgement(Status.VALID), ("propext",))
    both = (info("'Nat.t' does not depend on any axioms"), info("'t' depends on axioms: [cheat]"))
    assert rules.judge_audit(both, "t", DEFAULT_AXIOMS)[0].reasons == ("axiom: cheat",)


def test_namespace_left_open_after_the_statement_is_refused(tmp_path, shape) -> None:
    # `namespace X` stays open in the REPL's environment, so the audit's `t` would be X.t, not the statement
    thm = Theorem("t", "theorem t : 1 = 2 := by", CHEAT_HEADER, "lean")
    proof = "theorem t : 1 = 2 := by exact cheat.elim\nnamespace X\ntheorem t : True := trivial"
    v = lean_accepts(
        tmp_path, shape=shape, code=proof, header=CHEAT_HEADER, audit=_audit("'X.t' does not depend on any axioms")
    ).check(thm, proof)
    assert v.status is Status.REJECTED and v.reasons[0] in ("forbidden: namespace", "axiom audit of `X.t`, not `t`")


def test_statement_literals_are_compared_as_written(tmp_path, shape) -> None:
    # "ab".length = 3 is false; blanking the strings made "abc".length = 3 look like the same statement
    thm = Theorem("t", 'theorem t : "ab".length = 3 := by', "", "lean")
    code = 'theorem t : "abc".length = 3 := by decide'
    v = lean_accepts(tmp_path, shape=shape, code=code).check(thm, code)
    assert v.status is Status.REJECTED and v.reasons == ("statement changed",)
    assert rules.find_statement("theorem t : 'a' = 'b' := by", "theorem t : 'a' = 'a' := by") is None


def test_example_statement_is_audited_under_its_given_name(tmp_path, shape) -> None:
    thm = Theorem("e", "example : 1 = 2 := by", "", "lean")
    code = "example : 1 = 2 := by\n  rfl"
    sent = "theorem proofrl_example_ : 1 = 2 := by\n  rfl"
    v = lean_accepts(
        tmp_path, shape=shape, code=sent, name="proofrl_example_", audit=_audit("'t' does not depend on any axioms")
    ).check(thm, code)
    assert v.status is Status.REJECTED and v.reasons == ("axiom audit of `t`, not `proofrl_example_`",)


# == 4. meaning changed by notations, instances, options =========================================================
def test_header_options_are_allowlisted(tmp_path, shape) -> None:
    # Through the server the header is the client's: `debug.skipKernelTC` would let the kernel accept anything
    header = "set_option debug.skipKernelTC true"
    thm = Theorem("t", "theorem t : 1 = 2 := by", header, "lean")
    v = lean_accepts(tmp_path, shape=shape, code="theorem t : 1 = 2 := by rfl", header=header).check(thm, "rfl")
    assert v.status is Status.REJECTED and v.reasons == ("forbidden: set_option debug.skipKernelTC (header)",)


@pytest.mark.parametrize(
    "header",
    [
        "import Mathlib\n\nset_option maxHeartbeats 0\n\nopen BigOperators Real Nat Topology Rat\n\n",
        "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat",
        "import Mathlib\n\nopen Filter Set TopologicalSpace\nopen scoped Topology\n\n"
        "set_option checkBinderAnnotations false\n\n",
    ],
)
def test_dataset_headers_pass_the_option_allowlist(header) -> None:
    assert rules.header_problems(header, LeanConfig(command=("x",)).allowed_options) == ()


@pytest.mark.parametrize(
    "before",
    [
        'local notation "2" => 1',
        "macro_rules | `(2) => `(1)",
        "open Nat in",
        "set_option autoImplicit true in",
        "attribute [instance] Nat.instOfNat",
        "variable (x : Nat)",
        "@[instance] def i : OfNat Nat 2 := ⟨1⟩",
        "unif_hint (n : Nat) where |- n =?= 2",
        "export Nat (add)",
        "deriving instance Repr for Nat",
    ],
)
def test_meaning_changers_before_the_statement_are_refused(tmp_path, before) -> None:
    v = no_lean(tmp_path).check(FALSE, f"{before}\ntheorem t : 1 = 2 := by\n  rfl")
    assert v.status is Status.REJECTED and (
        v.reasons[0].startswith("statement changed: ") or v.reasons[0].startswith("unsupported: ")
    ), v


# == honest proofs still pass ==================================================================================
HONEST_TAILS = [
    "nlinarith [sq_nonneg (a - b), sq_nonneg (a + b), mul_pos ha hb]",
    "norm_num [Nat.gcd]",
    "intro x\n  simp only [Finset.sum_range_succ, Finset.sum_range_zero]\n  ring",
    "have h : (2 : ℝ) ≠ 0 := by norm_num\nfield_simp\nlinarith",
    "calc a = b := by rw [h]\n  _ = c := by omega",
    "show 1 + 1 = 2\ndecide",
    "exact fun n => by simp",
    "rcases h with ⟨x, hx⟩ | h\n· exact ⟨x, hx⟩\n· omega",
    "set_option maxRecDepth 10000 in\n  norm_num",
    "open Real in\n  simp [sqrt_eq_iff]",
    "induction n with\n| zero => rfl\n| succ k ih => simp [Finset.sum_range_succ, ih]; ring",
    "-- a comment with sorry and axiom in it\n/- and a block -/\nsimp",
    "exact (by decide : ∑ i ∈ Finset.range 4, i = 6)",
    "interval_cases x <;> simp_all",
    "have := h.2'",
]


@pytest.mark.parametrize("tail", HONEST_TAILS)
def test_honest_tactic_proofs_pass_the_text_rules(tail) -> None:
    assert rules.unsupported(tail) == ()
    assert rules.untrusted_constructs(tail, LeanConfig(command=("x",)).allowed_options) == ()


def test_honest_whole_file_with_helpers_is_valid(tmp_path, shape) -> None:
    header = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"
    thm = Theorem(
        "mathd_algebra_1", "theorem mathd_algebra_1 (a b : ℝ) (h : a = b) : a ^ 2 = b ^ 2 := by", header, "lean"
    )
    proof = (
        header + "\n\n/-- A helper. -/\nlemma sq_eq (a b : ℝ) (h : a = b) :\n    a ^ 2 = b ^ 2 := by\n  rw [h]\n\n"
        "@[simp] theorem helper₂ (x : ℕ) : x + 0 = x := by simp\n\n"
        "-- the main theorem\ntheorem mathd_algebra_1 (a b : ℝ) (h : a = b) : a ^ 2 = b ^ 2 := by\n"
        "  have h' : a - b = 0 := by linarith\n  nlinarith [sq_nonneg (a - b), sq_nonneg (a + b), h']\n\n"
        "theorem after (x : ℕ) : x = x := rfl\n"
    )
    split = split_header(proof)
    sent = "\n" * split.line_count + split.body  # the header lines are blanked, not removed
    v = lean_accepts(tmp_path, shape=shape, code=sent, name="mathd_algebra_1", header=header).check(thm, proof)
    assert v.status is Status.VALID, v


@needs_transcripts
def test_recorded_commands_pass_the_lexer() -> None:
    # every command real Lean ran in the recordings is text our lexer reads as Lean did, but for the one header
    # with a syntax quotation; and the proofs among them hold nothing the rules refuse
    flagged = []
    for inp in sorted(TRANSCRIPTS.rglob("*.in")):
        for q in requests_of(inp.read_text(encoding="utf-8")):
            cmd = json.loads(q).get("cmd")
            if cmd is None:
                continue
            if rules.unsupported(cmd):
                flagged.append(inp.name)
            if cmd.lstrip().startswith(("theorem", "example", "--")) and "sorry" not in cmd:
                assert rules.untrusted_constructs(cmd, LeanConfig(command=("x",)).allowed_options) == (), (
                    inp.name,
                    cmd,
                )
    assert flagged == ["H20231110.in"]


# == 5. tactic mode on every REPL generation =====================================================================
SELF = Theorem("ex", "theorem ex : False := by", "", "lean")  # `exact ex` closes its goal; the kernel refuses it


def _self_proof(tmp_path, shape, confirm: dict | None) -> LeanProver:
    """``theorem ex : False`` proved by itself in tactic mode: the answers are real Lean's (v4.33, copied from
    ``self_proof_exact_check``), shaped as ``shape``'s generation says; a REPL without ``proofStatus`` is then
    asked to elaborate the path as one command, answered ``confirm``."""
    version, legacy = shape
    sorry_answer = json.loads(recorded("self_proof_exact_check", 2)[1])
    step_answer = json.loads(recorded("self_proof_exact_check", 3)[1])
    ex = [
        ({"cmd": "theorem ex : False := by sorry"}, sorry_answer),
        ({"tactic": "exact ex", "proofState": 0}, step_answer),
    ]
    if legacy:
        ex = [(q, legacy_shape(a)) for q, a in ex]
        if confirm is not None:
            ex.append(({"cmd": "theorem ex : False := by exact ex"}, legacy_shape(confirm)))
    inp = write_transcript(tmp_path, "self", ex, framing="\n" if legacy else "\n\n")
    return LeanProver(replay_config(inp, version=version))


@needs_transcripts
def test_a_kernel_refusal_in_tactic_mode_is_never_a_solved_state(tmp_path, shape) -> None:
    """v4.19+ says ``Error: kernel type check failed``; an older REPL only says ``goals: []``, so the path is
    elaborated as one command, which real Lean refuses (its first recorded answer); the failure says why."""
    prover = _self_proof(tmp_path, shape, json.loads(recorded("self_proof_exact_check", 1)[1]))
    r = prover.step(prover.start(SELF), "exact ex")
    assert r.state is None and r.failure.kind is FailureKind.KERNEL
    if shape[1]:
        assert "fail to show termination" in r.failure.message and rules.UNCONFIRMED in r.failure.message
    else:
        assert r.failure.message.startswith("Error: kernel type check failed")


@needs_transcripts
@pytest.mark.parametrize(
    "confirm, why",
    [
        (
            {
                "messages": [
                    {
                        "severity": "error",
                        "pos": {"line": 1, "column": 8},
                        "endPos": {"line": 1, "column": 10},
                        "data": "(kernel) declaration has metavariables 'ex'",
                    }
                ],
                "env": 0,
            },
            "kernel: declaration has metavariables",
        ),
        (
            {
                "messages": [
                    {
                        "severity": "warning",
                        "pos": {"line": 1, "column": 8},
                        "endPos": {"line": 1, "column": 10},
                        "data": "declaration uses `sorry`",
                    }
                ],
                "env": 0,
            },
            "sorry",
        ),
        ({"env": 0}, None),
    ],
)
def test_a_legacy_closing_step_stands_only_if_the_path_elaborates_as_one_command(tmp_path, confirm, why) -> None:
    """SYNTHETIC confirmation answers (the shapes Lean gives a whole command): a kernel error or a sorry refuses
    the step, a clean command confirms it. With v4.19+ shapes no command is asked (the replay would crash)."""
    prover = _self_proof(tmp_path, SHAPES["v4.9"], confirm)
    r = prover.step(prover.start(SELF), "exact ex")
    if why is None:
        assert r.ok and r.state.solved and r.state.tactics == ("exact ex",)
    else:
        assert r.state is None and why in r.failure.message and rules.UNCONFIRMED in r.failure.message
