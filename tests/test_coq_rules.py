import pytest

from proofrl.provers.coq.rules import DEFAULT_AXIOM_ALLOWLIST, assumption_reasons, forbidden_reason, parse_assumptions


@pytest.mark.parametrize(
    "sentence, reason",
    [
        ("Axiom oops : False.", "forbidden: Axiom"),
        ("Admitted.", "forbidden: Admitted"),
        ("Unset Guard Checking.", "forbidden: Unset"),
        ("Local Notation \"x + y\" := (x * y).", "forbidden: Local"),
        ("2: Abort.", "forbidden: Abort"),
        ("admit.", "forbidden: admit"),
        ("split; [admit | auto].", "forbidden: admit"),
        ("all: give_up.", "forbidden: give_up"),
        ("intros. (* Axiom in a comment is fine *)", None),
        ('idtac "admit".', None),
        ("Unshelve.", None),
        ("apply Nat.add_comm.", None),
        ("exists (Nat.add 1 2).", None),
    ],
)
def test_forbidden(sentence, reason):
    assert forbidden_reason(sentence) == reason


REALS = """Axioms:
ClassicalDedekindReals.sig_forall_dec
  : forall P : nat -> Prop,
    (forall n : nat, {P n} + {~ P n}) -> {n : nat | ~ P n} + {forall n : nat, P n}
functional_extensionality_dep : forall (A : Type) (B : A -> Type) (f g : forall x : A, B x),
    (forall x : A, f x = g x) -> f = g
"""


def test_reals_axioms_are_allowed_even_when_printed_short():
    a = parse_assumptions(REALS)
    assert a.axioms == ("ClassicalDedekindReals.sig_forall_dec", "functional_extensionality_dep")
    assert assumption_reasons(a, "t", DEFAULT_AXIOM_ALLOWLIST) == []


def test_unsafe_flags_user_axioms_and_self_reference():
    text = "Axioms:\noops : False\nt : 1 = 2\nloop is assumed to be guarded.\nBad is assumed to be positive.\n"
    reasons = assumption_reasons(parse_assumptions(text), "t", DEFAULT_AXIOM_ALLOWLIST)
    assert reasons == ["unsafe: guard checking", "unsafe: positivity checking", "axiom: oops", "admitted"]


def test_closed_proof_has_no_assumptions():
    assert parse_assumptions("Closed under the global context").axioms == ()
