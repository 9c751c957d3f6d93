"""Defects an attacker found in the verification service, each over real parts: real ``coqidetop``
processes, real uvicorn on loopback, raw sockets, ``proofrl serve`` as a subprocess."""

from __future__ import annotations

import time

import pytest

from conftest import requires_coq
from proofrl.provers.base import Status, Theorem
from proofrl.provers.factory import make_pool
from proofrl.provers.pool import PoolConfig

pytestmark = requires_coq

T = Theorem("t", "Theorem t : True.", "Require Import Arith Lia.")


@pytest.fixture(scope="module")
def pool():
    p = make_pool("coq", pool=PoolConfig(workers=1, timeout=10))
    yield p
    p.close()


# -- 1. characters that are not legal XML 1.0 in a Coq message ----------------------------------------------------
@pytest.mark.parametrize("char", ["\x01", "\x02", "\x08", "\x0b", "\x1f"])
def test_a_control_character_in_a_message_is_text_not_a_crash(pool, char):
    failed = pool.check(T, f'Proof. fail "a{char}b". Qed.')
    assert failed.status is Status.ERROR, failed.reasons
    shown = chr(0x2400 + ord(char))  # the control picture: visible, one character for one
    assert failed.reasons == (f"Tactic failure: a{shown}b.",)
    assert failed.messages[0].text == f"Tactic failure: a{shown}b."
    printed = pool.check(T, f'Proof. idtac "{char}". exact I. Qed.')
    assert printed.status is Status.VALID, printed.reasons
    assert pool.stats.crashes == 0


def test_illegal_xml_in_a_reply_is_made_visible_not_refused():
    from proofrl.provers.coq import xml

    msg = '<feedback object="state" route="0"><state_id val="4"/><feedback_content val="message"><message><message_level val="info"/><option val="none"/><richpp><_><pp>{}</pp></_></richpp></message></feedback_content></feedback><value val="good"><unit/></value>'
    for raw, text in [(b"x\x02y", "x\u2402y"), (b"x&#2;y&#x1F;z&#65;", "x\u2402y\u241fzA"), (b"bad \xff utf-8 \xef\xbf\xbe", "bad \ufffd utf-8 \ufffd")]:
        reply = xml.parse_reply(msg.encode().replace(b"{}", raw))
        assert reply.good and [f.text for f in reply.feedback] == [text]
