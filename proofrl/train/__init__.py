"""Training loops, one file each (whole-proof GRPO, step-level GRPO/DPO, offline DPO, expert iteration, the EVA
reward model), the run folder they share and its one saved state; the objectives they optimise are
:mod:`proofrl.objectives`."""
