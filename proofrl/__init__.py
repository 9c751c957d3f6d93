"""proofrl: train and evaluate LLM theorem provers with reinforcement learning, judged by a real proof assistant."""

__version__ = "0.1.0"
