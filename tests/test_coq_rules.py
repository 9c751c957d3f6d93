"""The Coq proof rules as pure functions: the tactic allowlist, the wrapped form Coq receives, assumptions by
origin and the statement's type."""

import pytest

from proofrl.provers.coq.rules import (
    DEFAULT_AXIOM_ALLOWLIST,
    assumption_reasons,
    forbidden_reason,
    outgoing,
    parse_assumptions,
    printed_names,
    type_mismatch,
)


@pytest.mark.parametrize(
    "sentence, reason",
    [
        ("Axiom oops : False.", "forbidden: Axiom"),
        ("Admitted.", "forbidden: Admitted"),
        ("Unset Guard Checking.", "forbidden: Unset"),
        ('Local Notation "x + y" := (x * y).', "forbidden: Local"),
        ("2: Abort.", "forbidden: Abort"),
        ("admit.", "forbidden: admit"),
        ("split; [admit | auto].", "forbidden: admit"),
        ("all: give_up.", "forbidden: give_up"),
        # attributes hide a command behind a lowercase-free first word: refused because they are not tactics
        ("#[] Abort.", "forbidden: #[] Abort"),
        ("#[local] Axiom sig_forall_dec : False.", "forbidden: #[local] Axiom"),
        ("#[ ] Theorem t : True.", "forbidden: #[ ] Theorem"),
        ("#[universes(polymorphic)] Definition t : True := I.", "forbidden: #[universes(polymorphic)] Definition"),
        ("2: #[] Abort.", "forbidden: #[] Abort"),
        ("Time Qed.", "forbidden: Time"),
        ("Proof.", "forbidden: Proof"),  # only as the first sentence
        ("Ωmega.", "forbidden: Ωmega"),  # not ASCII-lowercase: not known to be a tactic
        ("@foo.", "forbidden: @foo"),
        ("Show Proof. ", None),
        ("intros. (* Axiom in a comment is fine *)", None),
        ('idtac "admit".', None),
        ("Unshelve.", None),
        ("apply Nat.add_comm.", None),
        ("exists (Nat.add 1 2).", None),
        ("[x]: exact I.", None),
        ("(split; auto).", None),
        ("[> auto | lia ].", None),
        ("move=> n /andP[H1 H2].", None),
        ("auto...", None),
    ],
)
def test_only_tactic_shapes_are_accepted(sentence, reason):
    assert forbidden_reason(sentence.strip()) == reason


@pytest.mark.parametrize("sentence", ["Proof.", "Proof using n m.", "Proof with auto."])
def test_proof_opens_only_as_the_first_sentence(sentence):
    assert forbidden_reason(sentence, first=True) is None
    assert forbidden_reason(sentence, first=False) is not None
    assert forbidden_reason("Proof with #[] Abort.", first=True) == "forbidden: #[] Abort"


def test_outgoing_wraps_the_tactic_after_its_selector_and_maps_offsets_back():
    sent = "2: exact (foo 1)."
    out = outgoing(sent, 4.2)
    assert out.text == "Timeout 5 2: ( exact (foo 1) )."
    at = out.text.index("foo")
    assert out.source_offset(at) == sent.index("foo")
    assert out.source_offset(0) == 0 and out.source_offset(len(out.text)) == len(sent)
    assert outgoing("-").text == "-" and outgoing("2: {").text == "2: {"
    assert outgoing("Proof with auto.", first=True).text == "Proof with ( auto )."
    assert outgoing("auto...").text == "( auto )..."


REALS = """Axioms:
ClassicalDedekindReals.sig_forall_dec
  : forall P : nat -> Prop,
    (forall n : nat, {P n} + {~ P n}) -> {n : nat | ~ P n} + {forall n : nat, P n}
functional_extensionality_dep : forall (A : Type) (B : A -> Type) (f g : forall x : A, B x),
    (forall x : A, f x = g x) -> f = g
sig_forall_dec : False
"""

LOCATED = {  # as Coq 8.16 prints Locate with a user axiom named sig_forall_dec in scope
    "Coq.Reals.ClassicalDedekindReals.sig_forall_dec": "Constant Coq.Reals.ClassicalDedekindReals.sig_forall_dec\n"
    "  (shorter name to refer to it in current context is ClassicalDedekindReals.sig_forall_dec)",
    "Coq.Reals.ClassicalDedekindReals.sig_not_dec": "No object of suffix\nCoq.Reals.ClassicalDedekindReals.sig_not_dec",
    "Coq.Logic.FunctionalExtensionality.functional_extensionality_dep": (
        "Constant Coq.Logic.FunctionalExtensionality.functional_extensionality_dep\n"
        "  (shorter name to refer to it in current context is functional_extensionality_dep)\n"
        "Constant Top.Coq.Logic.FunctionalExtensionality.functional_extensionality_dep\n"
        "  (shorter name to refer to it in current context is "
        "Top.Coq.Logic.FunctionalExtensionality.functional_extensionality_dep)"
    ),
}


def test_printed_names_are_those_of_the_allowlisted_objects_only():
    names = printed_names(LOCATED)
    assert names == {
        "ClassicalDedekindReals.sig_forall_dec": "Coq.Reals.ClassicalDedekindReals.sig_forall_dec",
        "functional_extensionality_dep": "Coq.Logic.FunctionalExtensionality.functional_extensionality_dep",
    }
    # without a note, the query itself is the shortest name
    assert printed_names({"A.b": "Constant A.b"}) == {"A.b": "A.b"}


def test_a_user_axiom_named_like_an_allowed_one_is_refused():
    a = parse_assumptions(REALS)
    assert a.axioms == ("ClassicalDedekindReals.sig_forall_dec", "functional_extensionality_dep", "sig_forall_dec")
    assert assumption_reasons(a, "t", printed_names(LOCATED)) == ["axiom: sig_forall_dec"]
    # the old rule (a dotted suffix of an allowlisted name) let it through; no suffix matching is left
    assert assumption_reasons(parse_assumptions("Axioms:\nsig_not_dec : False\n"), "t", printed_names(LOCATED)) == [
        "axiom: sig_not_dec"
    ]


def test_unsafe_flags_user_axioms_and_self_reference():
    text = "Axioms:\noops : False\nt : 1 = 2\nloop is assumed to be guarded.\nBad is assumed to be positive.\n"
    reasons = assumption_reasons(parse_assumptions(text), "t", printed_names(LOCATED))
    assert reasons == ["unsafe: guard checking", "unsafe: positivity checking", "axiom: oops", "admitted"]


def test_closed_proof_has_no_assumptions():
    assert parse_assumptions("Closed under the global context").axioms == ()


def test_allowlist_is_fully_qualified():
    assert all(a.startswith("Coq.") and a.count(".") >= 2 for a in DEFAULT_AXIOM_ALLOWLIST)


def test_type_mismatch_compares_the_printed_kernel_types():
    assert (
        type_mismatch(
            "t\n     : forall n : nat, @eq nat n n", "proofrl_reference_statement\n  : forall n : nat,\n @eq nat n n"
        )
        is None
    )
    assert type_mismatch("t\n     : True", "proofrl_reference_statement\n     : False").startswith("statement changed")
    assert type_mismatch("", "x : False").startswith("statement check failed")


def test_a_used_in_line_is_where_an_assumption_is_used_not_one_more_assumption():
    text = "Axioms:\nclassic : forall P : Prop, P \\/ ~ P\nused in t to prove:\n  forall P : Prop, P\n"
    assert parse_assumptions(text).axioms == ("classic",)
    assert assumption_reasons(parse_assumptions(text), "t", printed_names(LOCATED)) == ["axiom: classic"]


def test_section_variables_are_kept_apart_from_axioms():
    text = "Section Variables:\nH\n: n = 0\nn : nat\nAxioms:\ncheat : False\n"
    a = parse_assumptions(text)
    assert (a.axioms, a.section_variables) == (("cheat",), ("H", "n"))
    assert assumption_reasons(a, "t", printed_names(LOCATED)) == [
        "section variable: H",
        "section variable: n",
        "axiom: cheat",
    ]
    assert assumption_reasons(a, "t", printed_names(LOCATED), open_section=True) == ["axiom: cheat"]


def test_a_long_constant_path_that_about_puts_on_the_next_line_is_read():
    from proofrl.provers.coq.rules import constant_path, identity_reason

    name = "fun_choice_and_ext_functions_repr_and_excluded_middle_imp_setoid_fun_choice"
    about = f"{name} : Prop\n\n{name} is opaque\nExpands to: Constant\nTop.{name}\n"
    ref = "proofrl_reference_statement : Prop\nExpands to: Constant Top.proofrl_reference_statement\n"
    assert constant_path(about) == f"Top.{name}"
    assert identity_reason(name, about, ref, about) is None
    assert identity_reason(name, about, ref, "Expands to: Constant Coq.Lists.List." + name) is not None
    assert constant_path("Notation Top.nn\nExpands to: Notation Top.nn") is None
