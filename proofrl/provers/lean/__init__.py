"""Lean 4 backend over leanprover-community/repl (see ``docs/lean.md``).

* :mod:`.session`: one REPL process and its framing;
* :mod:`.models`: typed REPL responses and the goal-text parser;
* :mod:`.rules`: the verdict rules, as pure functions;
* :mod:`.header`: header split and normalisation (the pool key);
* :mod:`.prover`: :class:`LeanProver` (the :class:`~proofrl.provers.base.Prover` protocol) and pool glue;
* :mod:`.config`: where the REPL is (``PROOFRL_LEAN_REPL``);
* :mod:`.replay`: a stand-in REPL that plays recorded transcripts, for tests.
"""

from .config import LeanConfig
from .prover import LeanProver, WarmSpares, lean_factory
from .session import LeanSession

__all__ = ["LeanConfig", "LeanProver", "LeanSession", "WarmSpares", "lean_factory"]
