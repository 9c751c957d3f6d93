"""Shared pieces of the verl tests: verl's real Hydra config composed with overrides, a tiny model directory
(verl's workers load the tokenizer and the HF config from a path), and the Coq problem they judge."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

verl = pytest.importorskip(
    "verl", reason='verl is not installed (the distributed extra: pip install -e ".[distributed]")'
)

import proofrl.verl.reward as reward_module  # noqa: E402

REWARD_PY = reward_module.__file__
RECORD = {
    "name": "add0",
    "header": "Require Import Arith Lia.",
    "formal_statement": "Theorem add0 : forall n : nat, n + 0 = n.",
    "backend": "coq",
}
VALID, WRONG = "Proof. intros. lia. Qed.", "Proof. intros. reflexivity. Qed."
ADMITTED, LOOP = "Proof. intros. admit. Admitted.", "Proof. intros. repeat (assert True by exact I). Qed."


def compose_verl(overrides: list[str]):
    """verl's own ``ppo_trainer`` config (the one ``python -m verl.trainer.main_ppo`` reads) with ``overrides``."""
    import verl.trainer.config as config_pkg
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=os.path.dirname(config_pkg.__file__), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def tiny_model(folder: Path) -> Path:
    """A tiny Llama with proofrl's ChatML tokenizer, saved where verl's model config can load it."""
    from proofrl.policy.tiny import build_tiny_model, sample_corpus

    if not (folder / "config.json").exists():
        build_tiny_model(folder, sample_corpus(), vocab_size=400, hidden=32, layers=1, heads=2)
    return folder
