"""The anchors' protocol (``proofrl eval search coq-stdlib-files:N``): files drawn from the held-out side, each
file's lemmas in order, the automation a file loads and nothing else, a memory that holds only what precedes
each lemma (offline: the loaded libraries' proofs; online: the file's own proofs as they come too)."""

from __future__ import annotations

import pytest
from conftest import requires_coq

from proofrl.errors import ConfigError
from proofrl.eval.library import ORDER, available_tactics, combination, file_problems

ZPOWER = "Coq.ZArith.Zpower"


@requires_coq
def test_automation_is_what_the_file_imports() -> None:
    """Zquot loads the ring library without importing it: ``ring`` is no tactic there, nor ``lia``."""
    zquot = "Require Import Coq.ZArith.Zquot.\n"
    assert available_tactics(("lia", "ring", "auto", "tauto"), zquot) == ("auto", "tauto")
    assert available_tactics(("lia", "nia", "lra", "easy"), zquot + "Require Import Lia.\n") == ("lia", "nia", "easy")
    assert combination(("auto", "easy"), 5) == "intros; solve [ timeout 2 auto | timeout 2 easy ]."
    assert combination((), 5) == "intros."  # closes nothing that intros alone does not


@requires_coq
def test_files_come_from_the_held_out_side_whole_and_in_file_order() -> None:
    problems, label = file_problems("coq-stdlib-files:3", seed=0)
    again, _ = file_problems("coq-stdlib-files:3", seed=0)
    assert [p.key for p in problems] == [p.key for p in again]
    assert {p.split for p in problems} == {"held-out"}
    modules = list(dict.fromkeys(p.module for p in problems))
    assert len(modules) == 3 and all(m in label for m in modules)
    for m in modules:
        mine = [p for p in problems if p.module == m]
        assert [p.extra[ORDER] for p in mine] == list(range(len(mine)))
        assert [p.extra["line"] for p in mine] == sorted(p.extra["line"] for p in mine)
    for bad in ("coq-stdlib-files:x", "coq-stdlib-files:0", "coq-stdlib-files:3:test"):
        with pytest.raises(ConfigError, match="coq-stdlib-files"):
            file_problems(bad)
    trained, label = file_problems("coq-stdlib-files:3:train", seed=0)
    assert {p.split for p in trained} == {"train"} and "train" in label
    both, _ = file_problems("coq-stdlib-files:1000:all", seed=0)
    assert {p.split for p in both} == {"train", "held-out"}
    assert {p.key for p in problems} < {p.key for p in both}


def test_the_tactic_model_row_runs_on_held_out_files_only(tmp_path) -> None:
    """Row (i)'s model was taught on the training side's files: asked of them, one line before any work."""
    from proofrl.eval.search_command import cli_eval_search

    with pytest.raises(ConfigError, match="held-out side"):
        cli_eval_search("coq-stdlib-files:2:train", rows="h,i", assets=tmp_path, out=tmp_path / "out")


@requires_coq
def test_the_memory_holds_only_what_precedes_each_lemma(tmp_path) -> None:
    """Zpower's first two lemmas are both ``reflexivity.``. Offline the memory holds the loaded libraries'
    proofs only (one decoy pair of BinInt, loaded by Zpower), so neither is proved; a pair of a module Zpower
    does not load, and the file's own later proofs, are never in it. Online the first lemma's human proof goes
    in once the lemma was tried, and the second is proved from it by the k-NN source."""
    from proofrl.data.tactics import extract_transitions
    from proofrl.eval.library import run_file_rows
    from proofrl.eval.provers import RowsConfig

    problems, _ = file_problems("coq-stdlib-files:10", seed=0)
    zpower = [p for p in problems if p.module == ZPOWER]
    assert [" ".join(p.proof.split()) for p in zpower[:2]] == ["Proof. reflexivity. Qed."] * 2
    stepped, _ = extract_transitions(zpower[:3], workers=1)
    transitions = [t for r in stepped for t in r.transitions]
    assert [t["tactic"] for t in transitions[:2]] == ["reflexivity.", "reflexivity."]
    decoy = {"module": "Coq.ZArith.BinInt", "theorem": "decoy", "state_before": "x : Z\n⊢ x = x", "tactic": "idtac."}
    unloaded = {
        **decoy,
        "module": "Coq.Reals.Rbase",
        "tactic": "reflexivity.",
        "state_before": transitions[1]["state_before"],
    }
    transitions += [decoy, unloaded]

    settings = RowsConfig(rows=("e", "f", "h"), seconds=5.0, workers=1, width=4)
    rows = run_file_rows(zpower[:2], settings, tmp_path, transitions, progress=False, say=lambda _: None)
    offline, online, premises = rows
    assert [r["proved"] for r in offline.results] == [False, False]
    assert offline.notes["memory_by_module"][ZPOWER] == {"start": 1, "end": 1, "learned": 0}
    assert [r["proved"] for r in online.results] == [False, True]
    assert online.results[1]["proof_sources"] == {"knn": 1}
    assert [r["memory_pairs"] for r in online.results] == [2, 3]  # after each lemma: its own proof, then the found one
    assert online.notes["proofs_by_source"] == {"knn": 1}
    # row h's premises: the statements of the libraries Zpower loads, then each of its lemmas once tried
    from proofrl.data.splits import stdlib_lemmas
    from proofrl.eval.library import loaded_libraries

    lemmas = stdlib_lemmas()
    loaded = [m for m in loaded_libraries(zpower[0].header) if m != ZPOWER]
    assert premises.notes["memory_by_module"][ZPOWER]["premises"] == sum(len(lemmas.get(m, ())) for m in loaded) + 2
    assert premises.results[1]["proved"]


def smoke_state(module: str):
    """The smoke ``n + 0 = n`` problem placed in ``module``, and the text of its first state in real Coq."""
    from dataclasses import replace

    from proofrl.eval.provers import smoke_problems
    from proofrl.provers.backend import state_text
    from proofrl.provers.coq.prover import CoqProver

    nat = replace(smoke_problems()[0], module=module)
    prover = CoqProver(nat.header)
    try:
        return nat, state_text(prover.start(nat.theorem))
    finally:
        prover.close()


@requires_coq
def test_memory_rows_on_any_problem_set_leave_the_problems_own_modules_out(tmp_path) -> None:
    """Rows e-g of ``proofrl eval search`` on a problem set that is not in file order: the memory is every
    module's human proofs but those of the problems' own modules."""
    from proofrl.eval.provers import RowsConfig, run_rows

    nat, text = smoke_state("Smoke.Nat")
    tactic = "intros; rewrite <- plus_n_O; reflexivity."
    other = {"module": "Other.Module", "theorem": "t", "state_before": text, "tactic": tactic}
    own = {**other, "module": "Smoke.Nat", "tactic": "intros; rewrite <- plus_n_O; exact eq_refl."}
    settings = RowsConfig(rows=("e", "f"), seconds=5.0, workers=1, width=4)
    offline, online = run_rows([nat], settings, tmp_path, progress=False, say=lambda _: None, transitions=[other, own])
    assert offline.results[0]["proved"] and offline.results[0]["proof_sources"] == {"knn": 1}
    assert offline.results[0]["proof"].count("exact eq_refl") == 0  # its own module's proof was never offered
    assert offline.notes["memory"] == {"start": 1, "end": 1, "learned": 0}
    assert online.notes["memory"]["learned"] == 1  # the found proof, remembered at once


@requires_coq
def test_row_i_asks_the_model_that_reads_the_retrieved_context(tmp_path) -> None:
    """Row i is row h with the tactic model taught with retrieved context among its sources: its tree has edges
    the model proposed, and a folder that is not such a model is refused in one line before anything runs. Row k
    searches with that model alone: every edge of its tree is the model's."""
    import json
    from dataclasses import replace

    from proofrl.errors import ConfigError
    from proofrl.eval.provers import RowsConfig, check_settings, run_rows, smoke_problems
    from proofrl.policy.memory import ProofMemory
    from proofrl.policy.retrieval import Retriever
    from proofrl.policy.tactic import train_tiny_tactic_model

    nat = replace(smoke_problems()[0], module="Smoke.Nat")
    other = {"module": "Other.Module", "theorem": "t", "state_before": "⊢ forall n : nat, n + 0 = n", "tactic": "lia."}
    train_tiny_tactic_model(
        [other] * 4,
        tmp_path / "model",
        epochs=2,
        batch=4,
        model={"hidden": 32, "layers": 1, "heads": 2, "vocab_size": 300},
        retriever=Retriever(ProofMemory.from_transitions([other], cap=None)),
    )
    with pytest.raises(ConfigError) as e:
        check_settings(RowsConfig(rows=("i",), context_model=str(tmp_path)))
    assert "\n" not in str(e.value) and "--context-model" in str(e.value)
    # The root's one expansion steps about 17 proposals, the model's last (the lowest log-prob): about 3 s of Coq
    # on an idle machine, which a 5 s budget cut before the model's on a loaded one. The search stops at its proof.
    settings = RowsConfig(rows=("i",), seconds=60.0, workers=1, width=4, context_model=str(tmp_path / "model"))
    check_settings(settings)
    (row,) = run_rows([nat], settings, tmp_path / "out", progress=False, say=lambda _: None, transitions=[other])
    assert row.name.startswith("(i)") and row.results[0]["proved"]
    (tree,) = (tmp_path / "out" / "i-best-first" / "trees").iterdir()
    sources = {e.get("source") or "" for e in json.loads(tree.read_text())["edges"]}
    assert any("hf" in s for s in sources), sources
    # row k: the same model alone, the memory only in its prompt: every tactic tried is the model's
    (row,) = run_rows(
        [nat],
        replace(settings, rows=("k",), seconds=5.0),  # the model alone proves nothing here: it runs to its budget
        tmp_path / "k",
        progress=False,
        say=lambda _: None,
        transitions=[other],
    )
    assert row.name.startswith("(k)")
    (tree,) = (tmp_path / "k" / "k-best-first" / "trees").iterdir()
    assert {e.get("source") for e in json.loads(tree.read_text())["edges"]} == {"hf"}


@requires_coq
def test_row_j_composes_coqhammer_s_sauto_with_the_memory(tmp_path) -> None:
    """Row j is row h with ``intros; sauto.`` proposed at every node, CoqHammer's plugin in the header: a congruence
    over an arbitrary type that neither the memory (empty here) nor ``lia`` closes is proved by the sauto source,
    and the proof is rechecked with the plugin loaded."""
    from dataclasses import replace

    from proofrl.eval.provers import RowsConfig, hammer_installed, run_rows, smoke_problems

    if not hammer_installed():
        pytest.skip("CoqHammer is not installed (PROOFRL_COQ_LIBS=1 bash scripts/setup.sh)")
    statement = "Theorem congr_any : forall (A : Type) (f : A -> A) (x y : A), x = y -> f (f x) = f (f y)."
    problem = replace(smoke_problems()[0], name="congr_any", module="Smoke.Any", formal_statement=statement)
    settings = RowsConfig(rows=("h", "j"), seconds=5.0, workers=1, width=4, tactics=("lia",))
    h, j = run_rows([problem], settings, tmp_path, progress=False, say=lambda _: None, transitions=[])
    assert not h.results[0]["proved"]
    assert j.name.startswith("(j)") and j.results[0]["proved"], j.results[0]
    assert j.results[0]["proof_sources"] == {"sauto": 1} and "sauto" in j.results[0]["proof"]


@requires_coq
def test_row_j_proposes_the_coqhammer_tactic_it_is_given(tmp_path) -> None:
    """``node_hammer`` picks row j's tactic: with ``qauto`` the proof is made by ``intros; qauto.``, its source and
    the row's name say so, and no ``sauto`` is proposed; a tactic outside the three presets is one line naming them,
    and ``node_hammer_seconds`` is each proposal's step cap."""
    import json
    from dataclasses import replace

    from proofrl.eval.provers import (
        RowsConfig,
        check_settings,
        hammer_installed,
        memory_label,
        run_rows,
        sauto_source,
        smoke_problems,
    )

    with pytest.raises(ConfigError) as e:
        check_settings(RowsConfig(rows=("j",), node_hammer="crush"))
    assert "\n" not in str(e.value) and "--node-hammer" in str(e.value) and "qauto" in str(e.value)
    with pytest.raises(ConfigError, match="--node-hammer-seconds must be a positive number"):
        check_settings(RowsConfig(rows=("j",), node_hammer_seconds=0.0))
    assert sauto_source("sauto", 1.0).propose("", 1)[0].seconds == 1.0
    assert memory_label("j", RowsConfig(node_hammer_seconds=1.0)).endswith("sauto at every node, at most 1 s a call")
    if not hammer_installed():
        pytest.skip("CoqHammer is not installed (PROOFRL_COQ_LIBS=1 bash scripts/setup.sh)")
    statement = "Theorem congr_any : forall (A : Type) (f : A -> A) (x y : A), x = y -> f (f x) = f (f y)."
    problem = replace(smoke_problems()[0], name="congr_any", module="Smoke.Any", formal_statement=statement)
    settings = RowsConfig(rows=("j",), seconds=5.0, workers=1, width=4, tactics=("lia",), node_hammer="qauto")
    (j,) = run_rows([problem], settings, tmp_path, progress=False, say=lambda _: None, transitions=[])
    assert "qauto" in j.name and "sauto" not in j.name
    assert j.results[0]["proof_sources"] == {"qauto": 1} and "qauto" in j.results[0]["proof"], j.results[0]
    (tree,) = (tmp_path / "j-best-first" / "trees").iterdir()
    assert not [e for e in json.loads(tree.read_text())["edges"] if "sauto" in (e.get("tactic") or "")]


@requires_coq
def test_row_j_in_file_order_loads_coqhammer_s_plugin_after_the_file_s_header(tmp_path) -> None:
    """In file order row j's theorems keep their file's header and get CoqHammer's plugin after it: the sauto
    source's tactic runs (it may fail to close the goal, but Coq knows it)."""
    import json

    from proofrl.eval.library import run_file_rows
    from proofrl.eval.provers import RowsConfig, hammer_installed

    if not hammer_installed():
        pytest.skip("CoqHammer is not installed (PROOFRL_COQ_LIBS=1 bash scripts/setup.sh)")
    problems, _ = file_problems("coq-stdlib-files:10", seed=0)
    zpower = [p for p in problems if p.module == ZPOWER][:1]
    settings = RowsConfig(rows=("j",), seconds=5.0, workers=1, width=4)
    (row,) = run_file_rows(zpower, settings, tmp_path, [], progress=False, say=lambda _: None)
    assert row.name.startswith("(j)") and len(row.results) == 1
    (tree,) = (tmp_path / "j-best-first" / "trees").iterdir()
    sauto = [e for e in json.loads(tree.read_text())["edges"] if "sauto" in (e.get("source") or "")]
    assert sauto, "the sauto source proposed nothing"
    assert all("not found" not in str(e.get("failure") or "") for e in sauto), sauto


def test_a_corpus_s_training_side_is_its_memory(tmp_path, monkeypatch) -> None:
    """``coq-lib:NAME:SIDE``: the memory and the premises are the corpus split's training side, read from its
    folder; a split keeps its test side out, so the problems' own modules stay in the memory (only the problems
    themselves are left out), and a missing corpus is one line naming the command that builds it."""
    import json

    from proofrl.data.corpus import corpus_training_side

    split = tmp_path / "lib" / "splits" / "novel_premises"
    split.mkdir(parents=True)
    train = [{"module": "lib.a", "theorem": "lib.a.x", "state_before": "⊢ True", "tactic": "exact I."}]
    (split / "train.jsonl").write_text("".join(json.dumps(t) + "\n" for t in train))
    (split / "problems-train.jsonl").write_text(
        json.dumps({"name": "lib.a.x", "module": "lib.a", "formal_statement": "Lemma x : True."}) + "\n"
    )
    monkeypatch.setenv("PROOFRL_CORPORA", str(tmp_path))
    transitions, lemmas = corpus_training_side("coq-lib:lib:test")
    assert transitions == train and lemmas == {"lib.a": [("lib.a.x", "Lemma x : True.")]}
    with pytest.raises(FileNotFoundError) as e:
        corpus_training_side("coq-lib:other:test")
    assert "python -m proofrl.data.corpus --library other" in str(e.value)


@requires_coq
def test_memory_rows_split_by_theorem_keep_the_problems_modules(tmp_path) -> None:
    """A corpus's memory is split by theorem: a pair of the problem's own module serves it, its own never."""
    from proofrl.eval.provers import RowsConfig, run_rows

    nat, text = smoke_state("Lib.Nat")
    same_module = {
        "module": "Lib.Nat",
        "theorem": "other",
        "state_before": text,
        "tactic": "intros; rewrite <- plus_n_O; reflexivity.",
    }
    itself = {**same_module, "theorem": nat.name, "tactic": "intros; rewrite <- plus_n_O; exact eq_refl."}
    settings = RowsConfig(rows=("e",), seconds=5.0, workers=1, width=4)
    (row,) = run_rows(
        [nat], settings, tmp_path, progress=False, say=lambda _: None, transitions=[same_module, itself],
        split_by_module=False,
    )  # fmt: skip
    proof = row.results[0]["proof"]
    assert row.results[0]["proved"] and "reflexivity" in proof and "exact eq_refl" not in proof
    assert row.notes["memory"]["start"] == 1
    (row,) = run_rows([nat], settings, tmp_path / "m", progress=False, say=lambda _: None, transitions=[same_module])
    assert not row.results[0]["proved"] and row.notes["memory"]["start"] == 0  # split by module: its module is out


@requires_coq
def test_the_memory_rows_search_with_the_engine_they_are_given(tmp_path) -> None:
    """``memory_engine="mcts"``: row f in file order searches with reap's AND-OR MCTS at the same wall budget (its
    trees are MCTS trees, its folder and name say so) and still proves Zpower's second lemma from the first one's
    human proof; an engine that does not exist is refused in one line before anything runs."""
    import json

    from proofrl.data.tactics import extract_transitions
    from proofrl.errors import ConfigError
    from proofrl.eval.library import run_file_rows
    from proofrl.eval.provers import RowsConfig, check_settings

    with pytest.raises(ConfigError) as e:
        check_settings(RowsConfig(rows=("f",), memory_engine="dfs"))
    assert "\n" not in str(e.value) and "--memory-engine" in str(e.value)
    problems, _ = file_problems("coq-stdlib-files:10", seed=0)
    zpower = [p for p in problems if p.module == ZPOWER][:2]
    stepped, _ = extract_transitions(zpower, workers=1)
    transitions = [t for r in stepped for t in r.transitions]
    settings = RowsConfig(rows=("f",), seconds=5.0, workers=1, width=4, memory_engine="mcts")
    check_settings(settings)
    (row,) = run_file_rows(zpower, settings, tmp_path, transitions, progress=False, say=lambda _: None)
    assert row.name.endswith("by MCTS") and [r["proved"] for r in row.results] == [False, True]
    trees = sorted((tmp_path / "f-mcts" / "trees").iterdir())
    assert len(trees) == 2 and not (tmp_path / "f-best-first").exists()
    assert {json.loads(t.read_text())["search"]["algorithm"] for t in trees} == {"mcts"}


@requires_coq
def test_a_pool_beyond_the_core_modules_reads_its_premises_from_the_whole_library(tmp_path) -> None:
    """The bench's pool outside the core modules holds none of them, file by file in file order; row h on its
    lemmas offers the premises of every module the file loads (Coq.Init's too), not only the core modules'."""
    from proofrl.bench.memory import file_pool
    from proofrl.data.coq_stdlib import CORE_PREFIXES, STDLIB_ALL
    from proofrl.data.splits import stdlib_lemmas
    from proofrl.eval.library import library_transitions, loaded_libraries, run_file_rows
    from proofrl.eval.provers import RowsConfig

    pool = file_pool(100_000, "all", library="rest")
    assert pool and not any(p.module.startswith(CORE_PREFIXES) for p in pool)
    for m in {p.module for p in pool}:
        assert [p.extra[ORDER] for p in pool if p.module == m] == list(range(sum(p.module == m for p in pool)))
    assert [p.key for p in file_pool(50, "all", library="rest")] == [p.key for p in pool[:50]]
    with pytest.raises(ValueError, match="core or rest"):
        file_pool(5, "all", library="reals")
    with pytest.raises(ConfigError, match="core modules or the whole library"):
        library_transitions(tmp_path, prefixes=("Coq.Reals.",))

    permutation = [p for p in pool if p.module == "Coq.Sorting.Permutation"][:1]
    loaded = [m for m in loaded_libraries(permutation[0].header) if m != "Coq.Sorting.Permutation"]
    whole, core = (sum(len(ls.get(m, ())) for m in loaded) for ls in (stdlib_lemmas(STDLIB_ALL), stdlib_lemmas()))
    assert whole > core
    settings = RowsConfig(rows=("h",), seconds=2.0, workers=1, width=2)
    (row,) = run_file_rows(permutation, settings, tmp_path / "rows", [], progress=False, say=lambda _: None)
    assert row.notes["memory_by_module"]["Coq.Sorting.Permutation"]["premises"] == whole + 1


@requires_coq
def test_a_file_whose_header_does_not_load_fails_its_lemmas_not_the_run(tmp_path) -> None:
    """FSetCompat's header (its functors replayed outside them) does not load in a fresh coqc: its lemmas are
    recorded as failed searches, and the file after it is searched as usual."""
    from proofrl.bench.memory import file_pool
    from proofrl.eval.library import run_file_rows
    from proofrl.eval.provers import RowsConfig

    pool = file_pool(100_000, "all", library="rest")
    broken = [p for p in pool if p.module == "Coq.FSets.FSetCompat"][:1]
    fine = [p for p in pool if p.module == "Coq.Sorting.Permutation"][:1]
    assert broken and fine
    said: list[str] = []
    settings = RowsConfig(rows=("h",), seconds=2.0, workers=1, width=2)
    (row,) = run_file_rows(broken + fine, settings, tmp_path, [], progress=False, say=said.append)
    assert [r["name"] for r in row.results] == [broken[0].key, fine[0].key]
    assert not row.results[0]["proved"] and row.results[0]["reason"].startswith("header failed to load")
    assert any("Coq.FSets.FSetCompat" in line and "recorded as failed" in line for line in said)
    assert row.notes["memory_by_module"]["Coq.Sorting.Permutation"]["premises"] > 1


@requires_coq
def _no_pace():
    raise AssertionError("the pace was taken in a sitting that searched nothing")


def test_a_killed_file_order_row_resumes_at_the_modules_it_had_not_finished(tmp_path, monkeypatch) -> None:
    """Each module's search starts from what its file loads, so a file-order row keeps each finished module: a
    rerun with the same key takes a kept module's records as they were and searches only the module whose record
    is gone; under other settings nothing kept is taken."""
    import json
    import time

    from proofrl.data.tactics import extract_transitions
    from proofrl.eval.library import run_file_rows
    from proofrl.eval.provers import RowsConfig
    from proofrl.provers.coq import pace

    problems, _ = file_problems("coq-stdlib-files:10", seed=0)
    zpower = [p for p in problems if p.module == ZPOWER][:2]
    other = next(p for p in problems if p.module != ZPOWER)
    stepped, _ = extract_transitions(zpower, workers=1)
    transitions = [t for r in stepped for t in r.transitions]
    settings = RowsConfig(rows=("f",), seconds=3.0, workers=1, width=2)
    pool = [*zpower, other]
    t0 = time.monotonic()
    (first,) = run_file_rows(pool, settings, tmp_path, transitions, progress=False, say=lambda _: None)
    assert first.wall <= time.monotonic() - t0  # the sitting's span: its two modules' seconds are not added up
    assert [r["proved"] for r in first.results][:2] == [False, True] and "modules_kept" not in first.notes
    kept = tmp_path / "f-best-first" / "modules"
    assert sorted(f.name for f in kept.iterdir()) == sorted(f"{m}.json" for m in (ZPOWER, other.module))
    ends = [json.loads(f.read_text())["into_sitting"] for f in kept.iterdir()]
    assert first.wall == max(ends) and min(ends) < max(ends)  # the modules ran one after the other

    # killed before the row ended: no row file, the other module unfinished; Zpower's record marked to be seen
    for f in (tmp_path / "rows").iterdir():
        f.unlink()
    (kept / f"{other.module}.json").unlink()
    saved = json.loads((kept / f"{ZPOWER}.json").read_text())
    saved["results"]["0"]["wall_s"] = 12345.0
    (kept / f"{ZPOWER}.json").write_text(json.dumps(saved))
    trees = sorted((tmp_path / "f-best-first" / "trees").iterdir())
    for t in trees:
        t.unlink()
    (sitting,) = first.notes["sittings"]  # one sitting, its pace taken before any search
    assert sitting["modules"] == 2 and sitting["lemmas"] == 3 and sitting["pace_s"] > 0 and "load" in sitting
    assert saved["sitting"] == {k: v for k, v in sitting.items() if k not in ("modules", "lemmas", "wall_s")}
    assert first.wall == sitting["wall_s"] >= saved["into_sitting"] >= round(saved["wall"], 2)  # kept to 0.01 s
    saved["sitting"] = {**saved["sitting"], "started": "2000-01-01 00:00:00", "pace_s": 9.75}
    saved["into_sitting"] = 50.0  # that sitting's span, up to the end of its last kept module
    (kept / f"{ZPOWER}.json").write_text(json.dumps(saved))
    said: list[str] = []
    (again,) = run_file_rows(pool, settings, tmp_path, transitions, progress=False, say=said.append)
    before, now = again.notes["sittings"]
    assert (before["started"], before["pace_s"], before["modules"], before["lemmas"], before["wall_s"]) == (
        "2000-01-01 00:00:00",
        9.75,
        1,
        2,
        50.0,
    )
    assert now["modules"] == 1 and now["pace_s"] > 0 and again.wall == round(50.0 + now["wall_s"], 2)
    assert any("this sitting's pace" in x and "1 modules to search" in x for x in said)
    assert again.results[0]["wall_s"] == 12345.0 and [r["name"] for r in again.results] == [
        r["name"] for r in first.results
    ]
    assert again.notes["modules_kept"] == {"modules": [ZPOWER], "lemmas": 2, "wall_s": 50.0}
    assert again.notes["memory_by_module"][ZPOWER] == first.notes["memory_by_module"][ZPOWER]
    assert len(list((tmp_path / "f-best-first" / "trees").iterdir())) == 1  # only the other module searched

    # every module kept (the row's own file lost): nothing is searched, so no pace is taken; a module kept
    # without its sitting's record (an older run's) gives its own seconds, said so
    for f in (tmp_path / "rows").iterdir():
        f.unlink()
    del saved["sitting"], saved["into_sitting"]
    (kept / f"{ZPOWER}.json").write_text(json.dumps(saved))
    monkeypatch.setattr(pace, "machine_pace", _no_pace)
    (whole,) = run_file_rows(pool, settings, tmp_path, transitions, progress=False, say=lambda _: None)
    older, last = whole.notes["sittings"]
    assert older["started"] is None and older["wall_s"] == round(saved["wall"], 2) and "wall_from" in older
    assert last == now and whole.wall == round(older["wall_s"] + now["wall_s"], 2)
    assert whole.notes["modules_kept"]["wall_s"] == whole.wall  # every sitting's, the unrecorded one too
    monkeypatch.undo()

    other_settings = RowsConfig(rows=("f",), seconds=2.0, workers=1, width=2)
    said: list[str] = []
    (third,) = run_file_rows(pool, other_settings, tmp_path, transitions, progress=False, say=said.append)
    assert "modules_kept" not in third.notes and third.results[0]["wall_s"] != 12345.0
    # why nothing kept was taken is said, naming what differs: the row once, its modules once
    refused = [x for x in said if "under another key (settings.seconds 3.0 → 2.0)" in x]
    assert len(refused) == 2 and "running the row again" in refused[0] and "searching them again" in refused[1]
