"""Training: GRPO maths shared by every trainer (:mod:`proofrl.train.grpo`)."""
