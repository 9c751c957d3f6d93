"""Exceptions of proofrl. A wrong proof is a result (:class:`~proofrl.provers.base.Verdict`); these are for
things that are broken or misused.

* ProofrlError
  + ProverError                 the prover process misbehaved
    - ProverCrashed             it died or spoke garbage (``stderr`` attached)
    - ProverTimeout             it did not answer within ``seconds`` (its process group was killed)
    - ProtocolError             an answer we could not parse
    - OutputTooLarge            one answer longer than the reader keeps (the process is killed)
    - ProverFailed              it refused a call of the judge's own, outside the proof's sentences
  + StatementError              the theorem statement itself does not elaborate (``messages`` attached)
  + BackendUnavailable          the backend is not installed here (``why`` says what is missing)
  + ConfigError                 a bad setting or an unknown registered name
  + PolicyError                 the tactic policy (a model, an endpoint) failed during a search, which stopped
"""

from __future__ import annotations


class ProofrlError(Exception):
    """Base of every proofrl exception."""


class ProverError(ProofrlError):
    """The prover process misbehaved (as opposed to rejecting a proof)."""


class ProverCrashed(ProverError):
    def __init__(self, message: str, *, stderr: str = "", returncode: int | None = None):
        super().__init__(message + (f"\n--- stderr ---\n{stderr[-2000:]}" if stderr else ""))
        self.stderr = stderr
        self.returncode = returncode


class ProverTimeout(ProverError):
    def __init__(self, seconds: float, command: str = ""):
        super().__init__(f"no answer within {seconds:.1f}s" + (f" to {command[:200]!r}" if command else ""))
        self.seconds = seconds
        self.command = command


class ProtocolError(ProverError):
    def __init__(self, message: str, *, raw: str = ""):
        super().__init__(message + (f": {raw[:500]!r}" if raw else ""))
        self.raw = raw


class OutputTooLarge(ProverError):
    """One reply grew past ``limit`` bytes (a proof printing without end): the caller kills the process and the
    job is rejected, since the flood is the proof's doing."""

    def __init__(self, limit: int, command: str = ""):
        super().__init__(f"reply longer than {limit >> 20} MiB" + (f" to {command[:200]!r}" if command else ""))
        self.limit = limit
        self.command = command


class ProverFailed(ProverError):
    """The prover answered one of the judge's own calls (show the goals, a query) with an error that belongs
    to no sentence of the proof: a goal it cannot print, an anomaly. Not a crash (the process lives on) and
    not retried: the job's verdict is ``error`` with :attr:`reason`."""

    @property
    def reason(self) -> str:
        return " ".join(str(self).split())[:200]


class StatementError(ProofrlError):
    def __init__(self, message: str, *, messages: tuple = ()):
        super().__init__(message)
        self.messages = messages


class BackendUnavailable(ProofrlError):
    def __init__(self, backend: str, why: str):
        super().__init__(f"{backend} backend unavailable: {why}")
        self.backend = backend
        self.why = why


class ConfigError(ProofrlError, ValueError):
    """A bad setting or an unknown registered name: one line naming the key and what it accepts. The CLI prints
    it as is and exits with status 2. (A ``ValueError`` too, as the trainer's own config error was.)"""


class PolicyError(ProofrlError):
    """The policy (model or endpoint) failed during a search: the search stops and says so (what was found
    before stays written)."""
