"""The proof memory and its k-NN policy: retrieval, online additions, the cap, the folder's version check, policy
specs and mixtures (any order, one-line refusals), real Coq searches that prove a theorem from a remembered proof
(and do not without it), and where an online run saves what it learned."""

from __future__ import annotations

import json
import math

import pytest
from conftest import NAT, requires_coq
from search_support import ScriptedPolicy
from typer.testing import CliRunner

from proofrl.cli import app
from proofrl.errors import ConfigError
from proofrl.policy.memory import KNNPolicy, ProofMemory, knn_proposals, prover_version
from proofrl.policy.sources import (
    AUTOMATION_HEADER,
    MODEL_KINDS,
    MenuPolicy,
    MixedPolicy,
    is_composite,
    spec_parts,
    split_spec,
)
from proofrl.policy.tactic import POLICY_KINDS, Proposal, make_tactic_policy
from proofrl.provers.base import Theorem
from proofrl.search import SearchConfig, load_search_config, search_one
from proofrl.search.run import search_many
from proofrl.search.trace import read_trace

PLUS_N = Theorem("plus_n0", "Theorem plus_n0 : forall n : nat, n + 0 = n.", NAT)
PLUS_M = Theorem("plus_m0", "Theorem plus_m0 : forall m : nat, m + 0 = m.", NAT)

# the induction proof of n + 0 = n, one tactic per state (first match wins; lia is not offered)
TEACHER = [
    ("forall n", ["intros n."]),
    ("⊢ 0 + 0 = 0", ["reflexivity."]),
    ("⊢ S n + 0 = S n", ["simpl."]),
    ("⊢ S (n + 0) = S n", ["rewrite IH."]),
    ("⊢ S n = S n", ["reflexivity."]),
    ("⊢ n + 0 = n", ["induction n as [|n IH]."]),
]
DISTRACTORS = [
    ("⊢ forall b : bool, negb (negb b) = b", "intros b."),
    ("b : bool\n⊢ negb (negb b) = b", "destruct b; reflexivity."),
    ("l : list nat\n⊢ l ++ nil = l", "apply app_nil_r."),
    ("⊢ forall n m : nat, n + m = m + n", "intros n m."),
    ("n, m : nat\n⊢ n + m = m + n", "apply Nat.add_comm."),
    ("n : nat\n⊢ 0 + n = n", "reflexivity."),
    ("x, y : nat\nH : x = y\n⊢ y = x", "symmetry; exact H."),
]


def bfs() -> SearchConfig:
    return load_search_config("reprover", tactic_timeout=5.0, width=4, max_steps=12, seconds=60.0)


def memory_of(pairs, **kw) -> ProofMemory:
    mem = ProofMemory(**kw)
    for i, (state, tactic) in enumerate(pairs):
        mem.add(state, tactic, theorem=f"t{i}", online=False)
    return mem


# -- retrieval ----------------------------------------------------------------------------------------------------
def test_an_identical_state_and_a_renamed_one_retrieve_their_tactic_first():
    mem = memory_of(DISTRACTORS)
    for state, tactic in DISTRACTORS:
        assert mem.neighbours(state, 3)[0].tactic == tactic, state
    # the same goals under other names: the pair's shape wins over the names
    assert mem.neighbours("c : bool\n⊢ negb (negb c) = c", 3)[0].tactic == "destruct b; reflexivity."
    assert mem.neighbours("p, q : nat\n⊢ p + q = q + p", 3)[0].tactic == "apply Nat.add_comm."
    near = mem.neighbours("⊢ forall k : list nat, k ++ nil = k", 7)
    assert near[0].tactic == "apply app_nil_r." and near[0].theorem == "t2"
    assert [n.score for n in near] == sorted((n.score for n in near), reverse=True) and near[-1].score > 0
    assert len(mem.neighbours("n : nat\n⊢ 0 + n = n", 2)) == 2  # k is respected
    assert mem.neighbours("Zzz qqq", 3) == []  # no term in common: no neighbour, no error


def test_add_makes_a_new_pair_retrievable_at_once():
    mem = memory_of(DISTRACTORS)
    state = "f : nat -> nat\nH : forall x, f x = x\n⊢ f (f 3) = 3"
    assert all(n.tactic != "rewrite !H." for n in mem.neighbours(state, 10))  # the index is built now
    rebuilds = mem.stats.rebuilds
    assert mem.add(state, "rewrite !H.", theorem="mine")
    assert not mem.add(state, "rewrite  !H.")  # held already (whitespace aside): kept once
    near = mem.neighbours(state, 3)
    assert near[0] == ("rewrite !H.", near[0].score, "mine")
    assert mem.stats.rebuilds == rebuilds + 1  # rebuilt once, lazily, at the next query


def test_the_cap_evicts_the_oldest_offline_pairs_never_the_runs_own():
    mem = ProofMemory(cap=3)
    for i in range(3):
        mem.add(f"⊢ offline{i} = 0", f"tac{i}.", online=False)
    mem.add("⊢ online0 = 0", "mine0.")  # online by default
    assert [p.tactic for p in mem.pairs()] == ["tac1.", "tac2.", "mine0."]
    assert mem.stats.evicted == 1
    mem.add("⊢ offline1 = 0", "tac1.")  # an offline pair the run proves again becomes its own
    for i in range(1, 4):
        mem.add(f"⊢ online{i} = 0", f"mine{i}.")
    assert [p.tactic for p in mem.pairs()] == ["tac1.", "mine0.", "mine1.", "mine2.", "mine3."]
    assert all(p.online for p in mem.pairs())  # nothing offline left: online pairs stay past the cap
    assert mem.neighbours("⊢ offline2 = 0", 1)[0].tactic != "tac2."
    with pytest.raises(ConfigError):
        ProofMemory(cap=0)


def test_a_copy_holds_the_same_pairs_and_learns_apart_and_a_fork_is_the_policy_over_one():
    mem = ProofMemory(cap=3)
    mem.add("⊢ offline0 = 0", "tac0.", online=False)
    mem.add("⊢ online0 = 0", "mine0.", theorem="t")
    near = mem.neighbours("⊢ online0 = 0", 2)  # the index is built now
    twin = mem.copy()
    assert twin.pairs() == mem.pairs() and twin.cap == 3 and twin.online_count == 1
    assert twin.neighbours("⊢ online0 = 0", 2) == near and twin.stats.rebuilds == 0  # answers without a rebuild
    twin.add("⊢ held = 0", "held.", theorem="held")
    assert len(mem) == 2 and all(p.theorem != "held" for p in mem.pairs())  # what the copy learns is its own
    for i in range(1, 3):  # the copy's eviction order is the original's: offline first, the online one stays
        twin.add(f"⊢ online{i} = 0", f"mine{i}.")
    assert [p.tactic for p in twin.pairs()] == ["mine0.", "held.", "mine1.", "mine2."]
    policy = KNNPolicy(mem, online=True, neighbours=2, folder="somewhere")
    fork = policy.fork()
    assert (fork.online, fork.neighbours, fork.folder) == (True, 2, policy.folder) and fork.memory is not mem
    fork.record_proof("held", [("⊢ held = 0", "held.")])
    assert len(fork.memory) == 3 and len(mem) == 2


def test_a_large_memory_indexes_recent_pairs_apart_and_never_answers_an_evicted_one():
    mem = ProofMemory(cap=300, exact_below=100)
    for i in range(300):
        mem.add(f"x{i} : nat\n⊢ f{i} x{i} = g{i % 7} x{i}", f"apply lemma{i}.", online=False)
    assert mem.neighbours("x5 : nat\n⊢ f5 x5 = g5 x5", 1)[0].tactic == "apply lemma5."
    assert (mem.stats.rebuilds, mem.stats.recent_rebuilds) == (1, 0)
    mem.add("y : nat\n⊢ h y = k y", "apply hk.")  # online: the oldest offline pair (lemma0) is evicted
    assert mem.neighbours("z : nat\n⊢ h z = k z", 2)[0].tactic == "apply hk."
    assert all(n.tactic != "apply lemma0." for n in mem.neighbours("x0 : nat\n⊢ f0 x0 = g0 x0", 5))
    assert (mem.stats.rebuilds, mem.stats.recent_rebuilds) == (1, 1)  # the small index only
    for i in range(20):  # past WHOLE_AFTER (5 %) of the 300 indexed: the whole index again
        mem.add(f"w{i} : nat\n⊢ p{i} w{i} = q w{i}", f"apply pq{i}.")
    assert mem.neighbours("w3 : nat\n⊢ p3 w3 = q w3", 1)[0].tactic == "apply pq3."
    assert mem.stats.rebuilds == 2 and len(mem) == 300 and mem.online_count == 21 and mem.stats.evicted == 21


def test_every_rebuild_reads_each_pair_s_terms_tokenized_once_and_answers_as_a_fresh_memory(monkeypatch):
    """An online memory rebuilds its index as it grows; each state is tokenized once, when it is added, and the
    answers are those of a memory built afresh from the same pairs."""
    from proofrl.policy import memory as memory_mod

    calls: list[str] = []
    tokens = memory_mod.tokens
    monkeypatch.setattr(memory_mod, "tokens", lambda s: calls.append(s) or tokens(s))
    mem = ProofMemory(cap=None)
    query = "x : nat\n⊢ f x = g (h x)"
    for i in range(12):
        mem.add(f"x : nat\n⊢ f{i % 3} x = g{i} (h x)", f"tac{i}.", theorem=f"t{i}")
        mem.neighbours(query, 4)
    assert len(calls) == 12 + 12 and mem.stats.rebuilds == 12  # 12 adds, 12 queries: no state tokenized again
    fresh = ProofMemory(cap=None)
    fresh.add_many([(p.state, p.tactic) for p in mem.pairs()])
    assert fresh.neighbours(query, 4) == [n._replace(theorem="") for n in mem.neighbours(query, 4)]


def test_a_term_kept_for_rebuilds_is_one_string_however_many_states_use_it():
    """The terms kept per pair hold one string per distinct term: a memory of many states naming the same lemmas
    costs pointers, not a copy of each name per use (benchmarks/memory.py, 100,000 pairs: 403 MiB unshared, 209
    shared)."""
    mem = ProofMemory(cap=None)
    for i in range(50):
        mem.add(f"n{i} : nat\n⊢ Nat.add_comm_like n{i} = Nat.mul_comm_like n{i}", f"tac{i}.")
    uses = [t for terms in mem._terms.values() for t in terms if t == "Nat.add_comm_like"]
    assert len(uses) == 50 and len({id(t) for t in uses}) == 1


def test_build_from_transitions_skips_structural_steps_and_other_splits(tmp_path):
    recs = [
        {"theorem": "a", "state_before": "⊢ True", "tactic": "exact I.", "split": "train"},
        {"theorem": "a", "state_before": "⊢ True /\\ True", "tactic": "-", "structural": True, "split": "train"},
        {"theorem": "b", "state_before": "⊢ False -> False", "tactic": "intro H.", "split": "held-out"},
    ]
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert [p.tactic for p in ProofMemory.from_transitions([path]).pairs()] == ["exact I.", "intro H."]
    assert [p.tactic for p in ProofMemory.from_transitions([path], split="train").pairs()] == ["exact I."]
    assert not any(p.online for p in ProofMemory.from_transitions(recs).pairs())


# -- the folder ---------------------------------------------------------------------------------------------------
def test_save_and_load_round_trip_and_refusals_are_one_line(tmp_path):
    mem = memory_of(DISTRACTORS)
    mem.add("⊢ 1 = 1", "reflexivity.")
    mem.save(tmp_path / "m")
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    assert manifest["format"] == 1 and manifest["pairs"] == len(DISTRACTORS) + 1 and manifest["online"] == 1
    assert manifest["prover"] == prover_version() and manifest["prover"].startswith("coq ")
    back = ProofMemory.load(tmp_path / "m")
    assert [(p.state, p.tactic, p.theorem) for p in back.pairs()] == [
        (p.state, p.tactic, p.theorem) for p in mem.pairs()
    ]
    assert not any(p.online for p in back.pairs())  # the new run's own pairs are the ones it adds

    ProofMemory(prover="coq 8.15.0").save(tmp_path / "old")
    with pytest.raises(ConfigError) as e:
        ProofMemory.load(tmp_path / "old")
    msg = str(e.value)
    assert "\n" not in msg and "coq 8.15.0" in msg and prover_version() in msg
    with pytest.raises(ConfigError) as e:
        make_tactic_policy(f"knn:{tmp_path / 'nothing'}")
    assert "\n" not in str(e.value) and "no proof memory" in str(e.value)


def test_an_empty_or_failing_memory_answers_no_tactic(tmp_path):
    ProofMemory().save(tmp_path / "empty")
    pol = make_tactic_policy(f"knn:{tmp_path / 'empty'}")
    assert isinstance(pol, KNNPolicy) and pol.propose("⊢ True", 4) == []

    class Broken(ProofMemory):
        def neighbours(self, state, k):
            raise RuntimeError("index corrupt")

    broken = KNNPolicy(Broken())
    assert broken.propose("⊢ True", 4) == [] and broken.failures == 1 and "index corrupt" in broken.last_error


# -- proposals, specs, mixtures -----------------------------------------------------------------------------------
def test_knn_proposals_are_distinct_similarity_weighted_log_probs_within_width():
    mem = memory_of([*DISTRACTORS, ("n : nat\n⊢ 0 + n = n", "simpl; reflexivity."), ("⊢ 0 + 0 = 0", "reflexivity.")])
    near = mem.neighbours("n : nat\n⊢ 0 + n = n", 4)
    props = knn_proposals(near, 4)
    assert len({p.tactic for p in props}) == len(props) <= 4
    assert all(p.source == "knn" and p.logprob_sum <= 0 for p in props)
    assert math.fsum(math.exp(p.logprob_sum) for p in props) == pytest.approx(1.0)  # all of the 4 kept
    # reflexivity. is taken at two of the near states: its votes add up
    refl = next(p for p in props if p.tactic == "reflexivity.")
    assert refl.count == 2 and refl == props[0]
    assert len(knn_proposals(near, 1)) == 1 and knn_proposals([], 4) == []


def test_specs_split_only_before_a_source_and_mix_with_sources_named(tmp_path):
    assert split_spec("knn:/a+b/mem+hf:/models/x+y+auto") == ["knn:/a+b/mem", "hf:/models/x+y", "auto"]
    assert split_spec("knn-online:m+openai-chat:http://h:8000+auto:lia,easy") == [
        "knn-online:m",
        "openai-chat:http://h:8000",
        "auto:lia,easy",
    ]
    assert not is_composite("hf:/models/a+b") and is_composite("auto") and is_composite("knn:m")
    assert set(MODEL_KINDS) == set(POLICY_KINDS)
    memory_of(DISTRACTORS).save(tmp_path / "m")
    pol = make_tactic_policy(f"knn:{tmp_path / 'm'}+auto:easy,lia")
    assert isinstance(pol, MixedPolicy) and pol.name == "knn+auto" and pol.thread_safe
    assert pol.header == AUTOMATION_HEADER
    props = pol.propose("b : bool\n⊢ negb (negb b) = b", 2)
    assert [(p.tactic, p.source) for p in props[:2]] == [("intros; easy.", "auto"), ("intros; lia.", "auto")]
    assert ("destruct b; reflexivity.", "knn") in [(p.tactic, p.source) for p in props]
    with pytest.raises(ConfigError):
        make_tactic_policy("auto:blast")
    with pytest.raises(ConfigError):
        make_tactic_policy("knn:")


def test_a_spec_composes_in_any_order_and_a_bad_part_is_one_line_naming_it(tmp_path):
    memory_of(DISTRACTORS).save(tmp_path / "m")
    state = "b : bool\n⊢ negb (negb b) = b"
    first = make_tactic_policy(f"knn:{tmp_path / 'm'}+auto:easy")
    last = make_tactic_policy(f"auto:easy+knn:{tmp_path / 'm'}")
    assert isinstance(first, MixedPolicy) and isinstance(last, MixedPolicy)
    assert (first.name, last.name) == ("knn+auto", "auto+knn") and first.header == last.header == AUTOMATION_HEADER
    assert [(p.tactic, p.source) for p in first.propose(state, 2)] == [
        (p.tactic, p.source) for p in last.propose(state, 2)
    ]
    assert spec_parts("hf:/models/a+b+knn:m") == [("hf", "/models/a+b"), ("knn", "m")]
    assert spec_parts("knn:m+hf:/models/a+b") == [("knn", "m"), ("hf", "/models/a+b")]
    for spec, says in [
        ("auto+bogus:x", "'auto+bogus:x'"),  # no source named bogus: the + stays inside the part
        ("knn:m+hf", "'hf' in 'knn:m+hf': name its DIR"),
        ("openai-chat+auto", "'openai-chat' in 'openai-chat+auto': name its URL"),
        ("+auto", "'' in '+auto'"),
        ("knn-online:a+auto+knn-online:b", "at most one online proof memory"),
    ]:
        with pytest.raises(ConfigError) as e:
            make_tactic_policy(spec)
        assert "\n" not in str(e.value) and says in str(e.value), str(e.value)
    with pytest.raises(ConfigError, match="served model"):  # refused before the memory is loaded
        make_tactic_policy(f"knn:{tmp_path / 'nothing'}+openai:http://127.0.0.1:9")


def test_a_tactic_two_sources_propose_is_one_proposal_naming_both():
    class Model:
        name = "hf"

        def propose(self, state_text, k):
            return [Proposal("intros; easy.", -3.0, -1.0), Proposal("simpl.", -1.5, -0.5)]

    props = MixedPolicy([Model(), MenuPolicy(["intros; easy."])]).propose("⊢ True", 4)
    assert [(p.tactic, p.logprob_sum, p.source) for p in props] == [
        ("intros; easy.", 0.0, "hf+auto"),
        ("simpl.", -1.5, "hf"),
    ]


# -- real searches ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def taught_steps(coq):
    """The steps of a real proof of ``forall n, n + 0 = n`` by induction, as the search saw its states."""
    r = search_one(PLUS_N, coq, ScriptedPolicy(TEACHER), bfs())
    assert r.status == "proved", r.reason
    steps = r.proof_steps()
    assert [t for _, t, _ in steps][:2] == ["intros n.", "induction n as [|n IH]."] and len(steps) == 6
    assert {s for _, _, s in steps} == {"scripted"}
    return [(state, tactic) for state, tactic, _ in steps]


@requires_coq
def test_knn_proves_a_renamed_theorem_from_a_remembered_proof_and_not_from_an_empty_memory(coq, taught_steps, tmp_path):
    recs = [{"theorem": "plus_n0", "state_before": s, "tactic": t, "split": "train"} for s, t in taught_steps]
    recs += [{"theorem": f"d{i}", "state_before": s, "tactic": t} for i, (s, t) in enumerate(DISTRACTORS)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    ProofMemory.from_transitions([tmp_path / "train.jsonl"]).save(tmp_path / "mem")
    ProofMemory().save(tmp_path / "empty")

    r = search_one(PLUS_M, coq, make_tactic_policy(f"knn:{tmp_path / 'mem'}"), bfs())
    assert r.status == "proved", r.reason
    assert r.verdict is not None and r.verdict.valid and coq.check(PLUS_M, r.proof).valid
    assert "induction n" in r.proof and r.line()["proof_sources"] == {"knn": 6}
    edges = r.tree_json()["edges"]
    assert edges and all(e["source"] == "knn" for e in edges)

    r = search_one(PLUS_M, coq, make_tactic_policy(f"knn:{tmp_path / 'empty'}"), bfs())
    assert r.status == "failed" and r.expansions == 1


class OneProofTeacher(ScriptedPolicy):
    """The teacher's table until a proof is recorded, then silent: a later theorem has only what the memory got."""

    def __init__(self, table):
        super().__init__(table)
        self.silent = False

    def propose(self, state_text, k):
        return [] if self.silent else super().propose(state_text, k)

    def record_proof(self, theorem, steps):
        self.silent = True


@requires_coq
@pytest.mark.parametrize("online", [True, False], ids=["online", "offline"])
def test_online_memory_proves_the_second_theorem_from_the_first_ones_proof(online, tmp_path):
    ProofMemory().save(tmp_path / "mem")
    knn = make_tactic_policy(f"knn{'-online' if online else ''}:{tmp_path / 'mem'}")
    pol = MixedPolicy([OneProofTeacher(TEACHER), knn])
    results = search_many([PLUS_N, PLUS_M], pol, out_dir=tmp_path / "run", workers=1, config=bfs(), progress=False)
    status = {r.name: r.status for r in results}
    assert status["plus_n0"] == "proved"
    assert status["plus_m0"] == ("proved" if online else "failed")
    assert len(knn.memory) == (7 if online else 0)  # the second proof adds its root state; its other 5 are held
    lines = {x["name"]: x for x in map(json.loads, (tmp_path / "run" / "results.jsonl").read_text().splitlines())}
    assert lines["plus_n0"]["proof_sources"] == {"scripted": 6}
    if online:
        assert lines["plus_m0"]["proof_sources"] == {"knn": 6}
        assert all(p.online for p in knn.memory.pairs())
        assert [p.theorem for p in knn.memory.pairs()] == ["plus_n0"] * 6 + ["plus_m0"]
    spans = [e for e in read_trace(tmp_path / "run" / "trace.jsonl") if e["name"] == "memory"]
    assert [(e["theorem"], e["extra"]["steps"]) for e in spans] == [("plus_n0", 6)] + (
        [("plus_m0", 6)] if online else []
    )
    # what the run learned is saved into the run's folder; the memory it loaded is left as it was
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert len(ProofMemory.load(tmp_path / "mem")) == 0
    if online:
        saved = {"folder": str(tmp_path / "run" / "memory"), "pairs": 7, "learned": 7, "loaded_from": str(knn.folder)}
        assert summary["memory"] == saved and knn.folder == tmp_path / "mem"
        assert [p.tactic for p in ProofMemory.load(tmp_path / "run" / "memory").pairs()] == [
            p.tactic for p in knn.memory.pairs()
        ]
    else:
        assert "memory" not in summary and not (tmp_path / "run" / "memory").exists()


def test_a_run_never_saves_over_the_memory_it_loaded_unless_told_and_saves_only_online_memory(tmp_path):
    """Refused before any search (no Coq needed): nothing of the run is written."""
    memory_of(DISTRACTORS).save(tmp_path / "run" / "memory")
    online = make_tactic_policy(f"knn-online:{tmp_path / 'run' / 'memory'}+auto:lia")
    with pytest.raises(ConfigError) as e:
        search_many([PLUS_N], online, out_dir=tmp_path / "run", config=bfs(), progress=False)
    assert "\n" not in str(e.value) and "over the one it loaded" in str(e.value)
    offline = make_tactic_policy(f"knn:{tmp_path / 'run' / 'memory'}")
    with pytest.raises(ConfigError, match="no online proof memory"):
        search_many([PLUS_N], offline, out_dir=tmp_path / "run", memory_out=tmp_path / "m2", progress=False)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["memory"]
    assert not (tmp_path / "m2").exists()


def cli(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


LIN = [
    {"name": "lin", "header": "", "formal_statement": "Theorem lin : forall x y : nat, x + y + 1 > y."},
    {"name": "lin2", "header": "", "formal_statement": "Theorem lin2 : forall a b : nat, a + b + 2 > b."},
]


@requires_coq
def test_the_cli_takes_sources_in_any_order_and_saves_an_online_memory_where_told(tmp_path):
    problems = [tmp_path / "p1.jsonl", tmp_path / "p2.jsonl"]
    for path, problem in zip(problems, LIN, strict=True):
        path.write_text(json.dumps(problem) + "\n")
    memory_of(DISTRACTORS).save(tmp_path / "mem")
    for spec in (
        f"hf:{tmp_path / 'no-model'}+knn:{tmp_path / 'mem'}",
        f"knn:{tmp_path / 'mem'}+hf:{tmp_path / 'no-model'}",
    ):
        r = cli("search", problems[0], "--policy", spec, "--out", tmp_path / "bad")
        assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.stderr  # the model's folder named alone
        assert f"no model directory at '{tmp_path / 'no-model'}' (models" in r.stderr, r.stderr
    r = cli("search", problems[0], "--policy", "auto+nonsense:x", "--out", tmp_path / "bad")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "unknown tactic policy 'auto+nonsense:x'" in r.stderr
    r = cli("search", problems[0], "--policy", f"knn-online:{tmp_path / 'mem'}", "--ray", "local")
    assert r.exit_code == 2 and "use knn:DIR with --ray" in " ".join(r.stderr.split()), r.stderr

    out = tmp_path / "run1"
    r = cli(
        "search",
        problems[0],
        "--algorithm",
        "best-first",
        "--policy",
        f"auto:lia+knn-online:{tmp_path / 'mem'}",
        "--out",
        out,
        "--expansions",
        "2",
        "--width",
        "2",
    )
    assert r.exit_code == 0, r.output
    assert json.loads((out / "results.jsonl").read_text())["status"] == "proved"
    assert "proof memory: 8 pairs (1 learned) saved in" in " ".join(r.output.split())
    assert len(ProofMemory.load(tmp_path / "mem")) == len(DISTRACTORS)  # the memory it loaded: as it was
    learned = ProofMemory.load(out / "memory")
    assert len(learned) == len(DISTRACTORS) + 1 and learned.pairs()[-1].tactic == "intros; lia."

    # the next run, from the memory the first one saved, into the same folder: refused, unless told to update it
    spec = f"knn-online:{out / 'memory'}+auto:lia"
    r = cli("search", problems[1], "--algorithm", "best-first", "--policy", spec, "--out", out)
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "--save-memory" in r.stderr, r.stderr
    r = cli(
        "search",
        problems[1],
        "--algorithm",
        "best-first",
        "--policy",
        spec,
        "--out",
        tmp_path / "run2",
        "--save-memory",
        out / "memory",
        "--expansions",
        "2",
        "--width",
        "2",
    )
    assert r.exit_code == 0, r.output
    assert len(ProofMemory.load(out / "memory")) == len(DISTRACTORS) + 2
    assert not (tmp_path / "run2" / "memory").exists()


@requires_coq
def test_the_automation_menu_in_a_spec_loads_its_libraries_into_the_header(tmp_path):
    th = Theorem("lin", "Theorem lin : forall x y : nat, x + y + 1 > y.", "")
    results = search_many([th], make_tactic_policy("auto:lia"), out_dir=tmp_path, config=bfs(), progress=False)
    assert results[0].status == "proved" and results[0].proof.split() == ["intros;", "lia."]
    assert results[0].line()["proof_sources"] == {"auto": 1}
