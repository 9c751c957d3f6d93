"""The learning objectives every loop shares, as tensor maths: GRPO (advantages, the PPO-clip surrogate, KL, loss
aggregation, the update over K epochs; :mod:`.grpo`) and DPO on tactic validity (:mod:`.dpo`)."""
