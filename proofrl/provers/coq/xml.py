"""The ``coqidetop`` XML protocol (version 20220205, Coq 8.15+): building calls and reading replies.

A reply is any number of ``<feedback>`` elements followed by exactly one ``<value>``; we frame on
``</value>`` (inside strings ``<`` is always escaped, so the tag cannot occur in content). The pretty-printer
emits the HTML entity ``&nbsp;``, which is not XML; it is rewritten before parsing. Coq also prints a
message's characters as they are, control characters included (``idtac "\\x02"``), which XML 1.0 forbids even
as character references: each becomes its Unicode control picture (U+2400 + code, so ``\\x02`` reads ``␂``),
visible and one for one, before parsing.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

from ...errors import ProtocolError
from ..base import Goal, Hypothesis

END = b"</value>"


def find_end(buf: bytes) -> int:
    i = buf.find(END)
    return -1 if i < 0 else i + len(END)


def _s(text: str) -> str:
    return f"<string>{escape(text)}</string>"


def init() -> bytes:
    return b'<call val="Init"><option val="none"/></call>'


def add(sentence: str, state_id: int) -> bytes:
    # Add ((((sentence, edit_id), (state_id, verbose)), bp), (line_nb, bol_pos)) -- the 8.15+ shape
    return (
        f'<call val="Add"><pair><pair><pair><pair>{_s(sentence)}<int>0</int></pair>'
        f'<pair><state_id val="{state_id}"/><bool val="true"/></pair></pair><int>0</int></pair>'
        f"<pair><int>0</int><int>0</int></pair></pair></call>"
    ).encode()


def goal() -> bytes:
    return b'<call val="Goal"><unit/></call>'


def status(force: bool = True) -> bytes:
    return f'<call val="Status"><bool val="{str(force).lower()}"/></call>'.encode()


def edit_at(state_id: int) -> bytes:
    return f'<call val="Edit_at"><state_id val="{state_id}"/></call>'.encode()


def query(text: str, state_id: int) -> bytes:
    return (
        f'<call val="Query"><pair><route_id val="0"/><pair>{_s(text)}<state_id val="{state_id}"/></pair></pair></call>'
    ).encode()


@dataclass(frozen=True)
class Feedback:
    level: str  # error | warning | notice | info | debug
    text: str
    state_id: int | None
    loc: tuple[int, int] | None  # byte offsets inside the sentence of state_id


@dataclass(frozen=True)
class Goals:
    foreground: tuple[Goal, ...]
    background: int
    shelved: int
    given_up: int


@dataclass
class Reply:
    good: bool
    value: ET.Element
    feedback: list[Feedback] = field(default_factory=list)
    fail_state: int | None = None  # on fail: the last good state id
    fail_loc: tuple[int, int] | None = None  # on fail: byte offsets inside the failing sentence
    fail_message: str = ""

    def errors(self) -> list[Feedback]:
        return [f for f in self.feedback if f.level == "error"]


def richpp_text(el: ET.Element | None) -> str:
    return "" if el is None else "".join(el.itertext()).replace("\xa0", " ")


_ILLEGAL_BYTE = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")
"""C0 controls other than tab, newline and carriage return (never part of a multi-byte UTF-8 sequence)"""
_CHAR_REF = re.compile(rb"&#(?:x([0-9a-fA-F]{1,8})|([0-9]{1,10}));")
_ILLEGAL_CHAR = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _picture(code: int) -> str:
    return chr(0x2400 + code) if code < 0x20 else "\ufffd"


def _legal_ref(m: re.Match[bytes]) -> bytes:
    code = int(m.group(1), 16) if m.group(1) else int(m.group(2))
    legal = code in (0x9, 0xA, 0xD) or 0x20 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or 0x10000 <= code <= 0x10FFFF
    return m.group(0) if legal else _picture(code).encode()


def sanitise(frame: bytes) -> bytes:
    """``frame`` with what XML 1.0 cannot carry made visible: control bytes and character references to
    illegal characters become control pictures (``\\x02`` -> U+2402)."""
    frame = frame.replace(b"&nbsp;", b"&#160;")
    if b"&#" in frame:
        frame = _CHAR_REF.sub(_legal_ref, frame)
    return _ILLEGAL_BYTE.sub(lambda m: _picture(m.group(0)[0]).encode(), frame)


def parse_reply(frame: bytes) -> Reply:
    try:
        root = ET.fromstring(b"<r>" + sanitise(frame) + b"</r>")
    except ET.ParseError:
        # not UTF-8, or U+FFFE/U+FFFF: decode with replacement and map every illegal character
        text = _ILLEGAL_CHAR.sub(lambda m: _picture(ord(m.group(0))), sanitise(frame).decode("utf-8", "replace"))
        try:
            root = ET.fromstring("<r>" + text + "</r>")
        except ET.ParseError as e:
            raise ProtocolError(f"unreadable reply from coqidetop ({e})", raw=frame.decode("utf-8", "replace")) from e
    feedback: list[Feedback] = []
    value: ET.Element | None = None
    for el in root:
        if el.tag == "feedback":
            fb = _feedback(el)
            if fb is not None:
                feedback.append(fb)
        elif el.tag == "value":
            value = el
    if value is None:
        raise ProtocolError("reply without <value>", raw=frame.decode("utf-8", "replace"))
    good = value.get("val") == "good"
    reply = Reply(good, value, feedback)
    if not good:
        sid = value.find("state_id")
        reply.fail_state = int(sid.get("val", "0")) if sid is not None else None
        if value.get("loc_s") is not None:
            reply.fail_loc = (int(value.get("loc_s", 0)), int(value.get("loc_e", 0)))
        reply.fail_message = richpp_text(value.find("richpp")).strip()
    return reply


def _feedback(el: ET.Element) -> Feedback | None:
    content = el.find("feedback_content")
    if content is None or content.get("val") != "message":
        return None
    msg = content.find("message")
    if msg is None:
        return None
    level = msg.find("message_level")
    loc = None
    opt = msg.find("option")
    if opt is not None and opt.get("val") == "some":
        at = opt.find("loc")
        if at is not None:
            loc = (int(at.get("start", 0)), int(at.get("stop", 0)))
    sid = el.find("state_id")
    return Feedback(
        level=level.get("val", "info") if level is not None else "info",
        text=richpp_text(msg.find("richpp")).strip(),
        state_id=int_attr(sid, "val") if sid is not None else None,
        loc=loc,
    )


def state_id_of_add(reply: Reply) -> int:
    sid = reply.value.find("pair/state_id")
    if sid is None:
        raise ProtocolError("Add reply without a state id")
    return int_attr(sid, "val")


def int_attr(el: ET.Element, name: str) -> int:
    """An element's integer attribute; a missing one is a :class:`ProtocolError`."""
    value = el.get(name)
    if value is None:
        raise ProtocolError(f"<{el.tag}> without {name}", raw=ET.tostring(el, encoding="unicode")[:500])
    return int(value)


def parse_goals(reply: Reply) -> Goals | None:
    """``None`` when no proof is open; otherwise the four goal lists (background flattened)."""
    opt = reply.value.find("option")
    if opt is None or opt.get("val") == "none":
        return None
    g = opt.find("goals")
    lists = list(g) if g is not None else []
    if len(lists) != 4:
        raise ProtocolError("goals without four lists")
    fg = tuple(_goal(x) for x in lists[0].findall("goal"))
    bg = sum(len(p.findall("list/goal")) for p in lists[1].findall("pair"))
    return Goals(fg, bg, len(lists[2].findall("goal")), len(lists[3].findall("goal")))


def _goal(el: ET.Element) -> Goal:
    hyps_el = el.find("list")
    hyps = tuple(parse_hypothesis(richpp_text(h)) for h in (hyps_el if hyps_el is not None else []))
    concl = el.find("richpp")
    return Goal(hypotheses=hyps, conclusion=richpp_text(concl).strip())


def parse_hypothesis(text: str) -> Hypothesis:
    """``n, m : nat`` or ``x := 3 : nat`` (a let-bound hypothesis)."""
    text = " ".join(text.split())
    head, sep, typ = text.partition(" : ")
    if not sep:
        return Hypothesis((text,), "")
    value = None
    if " := " in head:
        head, _, value = head.partition(" := ")
        # the value may itself contain " : "; the type is after the last top-level " : "
        value, _, typ = (value + " : " + typ).rpartition(" : ")
    return Hypothesis(tuple(n.strip() for n in head.split(",")), typ.strip(), value)
