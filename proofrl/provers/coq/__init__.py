"""Coq 8.16 backend: ``coqidetop`` XML sessions for checking and stepping, ``coqc`` as the final judge."""

from .prover import CoqConfig, CoqProver, coqc_check
from .sentences import Sentence, SplitError, split_sentences

__all__ = ["CoqConfig", "CoqProver", "Sentence", "SplitError", "coqc_check", "split_sentences"]
