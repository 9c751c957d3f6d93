import pytest

from proofrl.provers.coq.sentences import SplitError, byte_to_char, position, split_sentences


def texts(s):
    return [x.text for x in split_sentences(s)]


def test_bullets_braces_and_selectors_are_their_own_sentences():
    assert texts("split. - lia. + { auto. } 2: { exact I. } all: lia. ** idtac.") == [
        "split.",
        "-",
        "lia.",
        "+",
        "{",
        "auto.",
        "}",
        "2: {",
        "exact I.",
        "}",
        "all: lia.",
        "**",
        "idtac.",
    ]


def test_qualified_names_and_ellipsis_do_not_end_sentences():
    assert texts("rewrite Nat.add_comm. auto... exact (1..2).") == ["rewrite Nat.add_comm.", "auto...", "exact (1..2)."]


def test_nested_comments_with_strings_are_skipped():
    assert texts('intros. (* a (* b. *) "c. *)" d. *) exact I.') == ["intros.", "exact I."]


def test_strings_with_doubled_quotes_and_periods():
    assert texts('idtac "a. ""b."". c". auto.') == ['idtac "a. ""b."". c".', "auto."]


def test_offsets_point_into_the_source():
    src = "intros.\n  exact I."
    s = split_sentences(src)[1]
    assert src[s.start : s.end] == "exact I." and position(src, s.start).line == 2


@pytest.mark.parametrize(
    "text, message, offset",
    [
        ("auto. (* open", "unterminated comment", 6),
        ("auto. (* a (* b *) ", "unterminated comment", 6),
        ('idtac "abc.', "unterminated string", 6),
        ('(* "abc. *)', "unterminated comment", 0),
        ("intros. auto", "missing final period", 8),
    ],
)
def test_malformed_text_is_a_precise_error(text, message, offset):
    with pytest.raises(SplitError) as e:
        split_sentences(text)
    assert str(e.value) == message and e.value.offset == offset


def test_byte_offsets_become_character_offsets():
    s = "exact (λ x, αβγ)."
    assert byte_to_char(s, len("exact (λ x, ".encode())) == len("exact (λ x, ")


def test_only_coqs_blanks_end_a_sentence_after_a_period():
    # Coq's lexer does not take a no-break space (or any other Unicode space) as a blank after a period
    assert [s.text for s in split_sentences("idtac.\u00a0exact I.")] == ["idtac.\u00a0exact I."]
    assert [s.text for s in split_sentences("idtac.\u2003exact I.\tauto.\x0cdone.")] == [
        "idtac.\u2003exact I.",
        "auto.",
        "done.",
    ]
