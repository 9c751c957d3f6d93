"""Rollouts: a policy's samples judged by the prover. :mod:`.proofs`: whole proofs sampled and verified (the
trainer's and ``proofrl eval``'s step); :mod:`.tactics`: groups of tactics run at a proof state (step-level GRPO
and the tactic metrics)."""
