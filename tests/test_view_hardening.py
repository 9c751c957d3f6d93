"""`proofrl view`'s page is mailed and archived on its own, so what goes into it is hardened: a results line
cannot pull a file from outside its run into the page, and bidirectional control characters in model or prover
text are shown as markers instead of reordering what the reader sees."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from chromium_support import Chromium, chromium_path

from proofrl.view import load_run, write_view

SECRET = "not-for-the-page-7f3a"
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def embedded(page: str) -> dict:
    """The run's data as the page's script parses it."""
    return json.loads(re.search(r'id="proofrl-data">(.*?)</script>', page, re.S).group(1))


def strings(x: object) -> list[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(x, str):
        return [x]
    if isinstance(x, dict):
        return [s for k, v in x.items() for s in [k, *strings(v)]]
    if isinstance(x, list):
        return [s for v in x for s in strings(v)]
    return []


def tiny_tree(goal: str = "⊢ True") -> dict:
    return {"root": 0, "nodes": [{"id": 0, "kind": "OR", "goals": [goal], "children": [], "parents": []}], "edges": []}


# -- tree paths stay inside the run --------------------------------------------------------------------------
def test_a_tree_path_out_of_the_run_is_not_read(tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"root": 0, "nodes": [{"id": 0, "goals": [SECRET]}], "edges": [], "key": SECRET}))
    run = tmp_path / "run"
    (run / "trees").mkdir(parents=True)
    (run / "trees" / "ok.json").write_text(json.dumps(tiny_tree()))
    (run / "trees" / "link.json").symlink_to(outside)
    (run / "trees" / "alias.json").symlink_to(run / "trees" / "ok.json")  # a link that stays inside is fine
    lines = [
        {"name": "absolute", "status": "failed", "tree": str(outside)},
        {"name": "dotdot", "status": "failed", "tree": "../outside.json"},
        {"name": "dotdot_inside", "status": "failed", "tree": "trees/../../outside.json"},
        {"name": "link", "status": "failed", "tree": "trees/link.json"},
        {"name": "nul", "status": "failed", "tree": "trees/a\0b.json"},
        {"name": "ok", "status": "proved", "tree": "trees/ok.json"},
        {"name": "alias", "status": "proved", "tree": "trees/alias.json"},
    ]
    (run / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (run / "trace.jsonl").write_text("")
    (tmp_path / "via-link").symlink_to(run)  # a run reached through a link still reads its own trees

    for folder in (run, tmp_path / "via-link"):
        page = write_view(folder).read_text()
        assert SECRET not in page
        data = embedded(page)
        trees = {t["name"]: t["tree"] for t in data["theorems"]}
        assert trees["ok"] == trees["alias"] == tiny_tree()
        assert [k for k, v in trees.items() if v is None] == ["absolute", "dotdot", "dotdot_inside", "link", "nul"]
        refused = [p for p in data["problems"] if "outside the run folder" in p]
        assert refused == [
            f"{outside}: outside the run folder, not read",
            "../outside.json: outside the run folder, not read",
            "trees/../../outside.json: outside the run folder, not read",
            "trees/link.json: outside the run folder, not read",
        ]
        assert len(data["problems"]) == 5 and "trees/a\0b.json: not a path" in data["problems"][4]


def test_a_run_file_linked_out_of_the_run_is_not_read(tmp_path):
    """The run's own files go through the same check: a ``summary.json`` that is a link out is refused too."""
    (tmp_path / "elsewhere.json").write_text(json.dumps({"key": SECRET}))
    run = tmp_path / "run"
    (run / "trees").mkdir(parents=True)
    (run / "results.jsonl").write_text(json.dumps({"name": "a", "status": "failed"}) + "\n")
    (run / "summary.json").symlink_to(tmp_path / "elsewhere.json")
    data = load_run(run)
    assert data["summary"] is None and "summary.json: outside the run folder, not read" in data["problems"]
    assert SECRET not in write_view(run).read_text()


# -- bidirectional controls ----------------------------------------------------------------------------------
def bidi_run(folder: Path) -> Path:
    """A run whose theorem name, proof, statement, goals, tactics, failure message, verdict reason and an
    unknown field (its key too) hold bidirectional control characters."""
    flip = "\u202e"
    tree = {
        "root": 0,
        "solution": [0],
        "search": {"theorem": {"statement": f"Theorem t : True{flip}.", "header": "\u2066Require x.\u2069"}},
        "nodes": [
            {
                "id": 0,
                "kind": "OR",
                "goals": [f"⊢ True {flip}eurT"],
                "children": [0, 1],
                "parents": [],
                "tactics": [],
                f"note{flip}": f"x{flip}y",
            },
            {
                "id": 1,
                "kind": "OR",
                "goals": [],
                "closes": True,
                "children": [],
                "parents": [0],
                "tactics": [f"exact I.{flip}"],
            },
        ],
        "edges": [
            {"id": 0, "src": 0, "dst": 1, "tactic": f"exact I.{flip}", "failure": None},
            {
                "id": 1,
                "src": 0,
                "dst": None,
                "tactic": f"{flip}.qer",
                "failure": {"kind": "error", "message": f"Unknown tactic \u200f{flip}\u202b"},
            },
        ],
    }
    (folder / "trees").mkdir(parents=True)
    (folder / "trees" / "t.json").write_text(json.dumps(tree))
    line = {
        "name": f"t{flip}",
        "status": "proved",
        "proof": f"exact I.{flip} (* {BIDI} *)",
        "reason": f"found {flip}",
        "verdict": {"status": "ok", "reasons": [f"checked \u061c{flip}"]},
        "tree": "trees/t.json",
    }
    (folder / "results.jsonl").write_text(json.dumps(line) + "\n")
    (folder / "trace.jsonl").write_text(json.dumps({"theorem": f"t{flip}", "name": f"tac{flip}", "seconds": 1.0}))
    return folder


def test_bidi_controls_in_the_page_are_markers(tmp_path):
    page = write_view(bidi_run(tmp_path)).read_text()
    assert not any(c in page for c in BIDI)
    assert not any(f"\\u{ord(c):04x}" in page.lower() for c in BIDI)  # nor JSON escapes that decode to them
    shown = strings(embedded(page))
    assert not [s for s in shown if any(c in s for c in BIDI)]
    t = embedded(page)["theorems"][0]
    assert t["name"] == "t⟨U+202E⟩" and t["proof"].startswith("exact I.⟨U+202E⟩ (* ⟨U+061C⟩⟨U+200E⟩⟨U+200F⟩")
    assert t["tree"]["edges"][1]["failure"]["message"] == "Unknown tactic ⟨U+200F⟩⟨U+202E⟩⟨U+202B⟩"
    assert t["tree"]["nodes"][0]["note⟨U+202E⟩"] == "x⟨U+202E⟩y"
    assert t["time"]["by_name"] == {"tac⟨U+202E⟩": {"count": 1, "seconds": 1.0}}


@pytest.mark.skipif(chromium_path() is None, reason="chromium not installed")
def test_bidi_controls_are_markers_in_the_browser(tmp_path):
    page = write_view(bidi_run(tmp_path / "run"))
    with Chromium() as c:
        c.open(page)
        c.js("[...document.querySelectorAll('.row')].forEach(r => r.click())")  # every row's fields, in turn
        c.js("document.querySelectorAll('.row')[1].click()")
        text = c.js(
            "[document.title, document.body.innerText, "
            "...[...document.querySelectorAll('[title]')].map(e => e.title)].join('\\n')"
        )
        assert c.js("document.querySelector('.proofscript').textContent").startswith("exact I.⟨U+202E⟩ (* ")
        assert c.js("document.querySelector('.row.proof .tac').textContent") == "exact I.⟨U+202E⟩"
        assert "Unknown tactic ⟨U+200F⟩⟨U+202E⟩⟨U+202B⟩" in text and "note⟨U+202E⟩" in text
        assert not [ch for ch in BIDI if ch in text]
        assert c.problems() == []
