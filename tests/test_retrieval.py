"""The tactic model's retrieved context: what the retriever returns (a theorem's own steps hidden), the prompt it
makes, teaching with it, and a model taught with it getting its memory from a policy spec (or a one-line error)."""

from __future__ import annotations

import pytest

from proofrl.errors import ConfigError
from proofrl.policy.memory import ProofMemory
from proofrl.policy.retrieval import CONTEXT_FILE, Context, ContextShape, Retriever, taught_shape
from proofrl.policy.tactic import HFTacticPolicy, make_tactic_policy, tactic_pairs, tactic_prompt

S1 = "n : nat\n⊢ n + 0 = n"
S2 = "n m : nat\n⊢ n + m = m + n"
S3 = "l : list nat\n⊢ l ++ nil = l"


def memory() -> ProofMemory:
    mem = ProofMemory(cap=None)
    mem.add(S1, "induction n.", theorem="add_0_r", online=False)
    mem.add("n : nat\n⊢ 0 + n = n", "reflexivity.", theorem="add_0_l", online=False)
    mem.add(S2, "apply Nat.add_comm.", theorem="add_comm", online=False)
    mem.add(S3, "apply app_nil_r.", theorem="app_nil_end", online=False)
    return mem


def premises() -> ProofMemory:
    mem = ProofMemory(cap=None)
    mem.add("forall n m : nat, n + m = m + n", "Coq.Arith.PeanoNat.Nat.add_comm", online=False)
    mem.add("forall n : nat, n + 0 = n", "Coq.Arith.PeanoNat.Nat.add_0_r", online=False)
    mem.add("forall l : list A, l ++ nil = l", "Coq.Lists.List.app_nil_r", online=False)
    return mem


def test_the_context_holds_the_nearest_tactics_and_premises_and_hides_the_theorem_itself():
    r = Retriever(memory(), premises(), ContextShape(tactics=2, premises=1))
    c = r.context(S1)
    assert c.tactics[0] == "induction n." and len(c.tactics) == 2
    assert c.premises == ("Coq.Arith.PeanoNat.Nat.add_0_r",)
    hidden = r.context(S1, exclude="Coq.Arith.PeanoNat.Nat.add_0_r")  # its own proof and its own name
    assert "induction n." not in hidden.tactics and hidden.tactics
    assert "Coq.Arith.PeanoNat.Nat.add_0_r" not in hidden.premises and len(hidden.premises) == 1
    assert Retriever(None, None).context(S1) == Context()


def test_a_failing_retrieval_is_an_empty_context_and_counted():
    class Broken(ProofMemory):
        def neighbours(self, state, k):
            raise RuntimeError("index corrupt")

    r = Retriever(Broken(), premises())
    assert r.context(S1) == Context() and r.failures == 1


def test_the_prompt_puts_the_context_before_the_goal():
    c = Context(("induction n.", "lia."), ("Coq.Arith.PeanoNat.Nat.add_0_r",))
    assert tactic_prompt(S1, c) == (
        "[TACTICS]\ninduction n.\nlia.\n[PREMISES]\nCoq.Arith.PeanoNat.Nat.add_0_r\n[GOAL]\n" + S1 + "\n[PROOFSTEP]\n"
    )
    assert tactic_prompt(S1, Context()) == tactic_prompt(S1) == f"[GOAL]\n{S1}\n[PROOFSTEP]\n"


def test_teaching_pairs_hide_each_transition_s_own_theorem():
    r = Retriever(memory(), None, ContextShape(tactics=4, premises=0))
    ts = [{"state_before": S1, "tactic": "induction n.", "theorem": "add_0_r", "module": "Coq.Arith.PeanoNat"}]
    ((prompt, tactic),) = tactic_pairs(ts, retriever=r)
    assert tactic == "induction n." and prompt.startswith("[TACTICS]\n") and prompt.endswith(tactic_prompt(S1))
    assert "induction n." not in prompt  # the transition's own step is not its context


@pytest.fixture(scope="module")
def taught(tmp_path_factory):
    """A tiny model taught with context, and the memory folder a spec names."""
    from proofrl.policy.tactic import train_tiny_tactic_model

    root = tmp_path_factory.mktemp("retrieval")
    mem = memory()
    mem.save(root / "memory")
    ts = [{"state_before": p.state, "tactic": p.tactic, "theorem": p.theorem, "structural": False} for p in mem.pairs()]
    train_tiny_tactic_model(
        ts,
        root / "model",
        epochs=2,
        batch=4,
        model={"hidden": 32, "layers": 1, "heads": 2, "vocab_size": 300},
        retriever=Retriever(mem, premises(), ContextShape(tactics=2, premises=2)),
    )
    return root


def test_a_model_taught_with_context_says_so_and_gets_the_spec_s_memory(taught):
    model = taught / "model"
    assert taught_shape(model) == ContextShape(tactics=2, premises=2)
    policy = make_tactic_policy(f"knn:{taught / 'memory'}+hf:{model}", max_tokens=8)
    hf = next(s for s in policy.sources if isinstance(s, HFTacticPolicy))
    knn = next(s for s in policy.sources if s is not hf)
    assert hf.retriever is not None and hf.retriever.memory is knn.memory
    assert hf.prompt(S1).startswith("[TACTICS]\ninduction n.\n")
    assert policy.propose(S1, 2)  # the mixture runs with the model reading its context

    with pytest.raises(ConfigError) as e:
        make_tactic_policy(f"hf:{model}")
    assert "\n" not in str(e.value) and "knn:DIR+hf:MODEL" in str(e.value)
    with pytest.raises(ConfigError) as e:
        make_tactic_policy(f"vllm:{model}")
    assert "\n" not in str(e.value) and "retrieved context" in str(e.value)


def test_a_long_state_is_cut_and_the_context_kept_whole(taught):
    from proofrl.policy.model import load_policy

    m, tok = load_policy(taught / "model")
    m.config.max_position_embeddings = 200
    policy = HFTacticPolicy(m, tok, max_tokens=8, retriever=Retriever(memory(), premises(), ContextShape(2, 2)))
    long_state = "H : " + " + ".join(["n"] * 400) + " = 0\n" + S1
    p = policy.prompt(long_state)
    assert p.startswith("[TACTICS]\n") and "[PREMISES]\n" in p and p.endswith(S1 + "\n[PROOFSTEP]\n")
    assert len(tok(p)["input_ids"]) <= policy.max_prompt_tokens


def test_a_damaged_shape_file_is_one_line(tmp_path):
    (tmp_path / CONTEXT_FILE).write_text("{not json")
    with pytest.raises(ConfigError) as e:
        taught_shape(tmp_path)
    assert "\n" not in str(e.value) and CONTEXT_FILE in str(e.value)
    assert taught_shape(tmp_path / "none") is None
