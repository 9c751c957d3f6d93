"""Rewards: functions from samples (and their verdicts) to scalars. One module per reward."""
