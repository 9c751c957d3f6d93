"""A tiny prover model taught a few Coq proofs, shared by the trainer, eval and demo tests.

The problems are our own: one header, so one Coq process serves them all; the proofs are memorised by a
short supervised run, so sampling at temperature 1 gives groups with both valid and invalid proofs.
"""

from __future__ import annotations

from pathlib import Path

from proofrl.policy.prompts import get_format
from proofrl.problems import Problem

HEADER = "Require Import Arith Lia.\n"
_PAIRS = [
    ("add_0_r", "forall n : nat, n + 0 = n", "intros n. lia."),
    ("add_comm3", "forall a b : nat, a + b = b + a", "intros a b. lia."),
    ("two_two", "2 + 2 = 4", "reflexivity."),
    ("true_i", "True", "trivial."),
    ("id_prop", "forall P : Prop, P -> P", "auto."),
    ("and_swap", "forall A B : Prop, A /\\ B -> B /\\ A", "tauto."),
    ("le_succ", "forall n : nat, n <= S n", "intros n. lia."),
    ("mul_1_l", "forall n : nat, 1 * n = n", "intros n. lia."),
]


def problems() -> list[Problem]:
    return [
        Problem(name, f"Theorem {name} : {stmt}.", HEADER, "coq", module="Test", proof=f"Proof.\n{proof}\nQed.")
        for name, stmt, proof in _PAIRS
    ]


def build_taught_model(out: Path, *, epochs: int = 30, seed: int = 0, heads: int = 4) -> Path:
    """Build the tiny model (hidden size 64, ``heads`` attention heads) and teach it the proofs above; returns the
    model directory. vLLM's CPU attention takes head sizes 32, 64, 80, ... only: ``heads=2`` for an engine."""
    import torch

    from proofrl.policy.model import load_policy
    from proofrl.policy.sft import supervised_finetune
    from proofrl.policy.tiny import build_tiny_model

    fmt = get_format("coq")
    probs = problems()
    corpus = [fmt.prompt(p) + fmt.completion(p, p.proof) for p in probs] * 4
    path = build_tiny_model(out / "tiny", corpus, vocab_size=512, hidden=64, layers=2, heads=heads, seed=seed)
    model, tok = load_policy(path, device="cpu")
    torch.manual_seed(seed)
    pairs = [(fmt.prompt(p, tok), fmt.completion(p, p.proof)) for p in probs]
    supervised_finetune(model, tok, pairs, epochs=epochs, lr=3e-3, batch=8, seed=seed)
    model.save_pretrained(out / "taught")
    tok.save_pretrained(out / "taught")
    return out / "taught"
