"""From a solved tree to a checked proof.

:meth:`~proofrl.search.tree.SearchTree.script` turns the solved sub-tree into sentences: the chosen tactic at
each OR node, and each AND node's goals as ``{ ... }`` blocks in goal order (focused blocks, which nest
without the bullet-level bookkeeping). :func:`final_verdict` hands them to ``prover.final_check``, which for
Coq writes the whole proof to a file for a fresh ``coqc`` (kernel ``Qed``, ``Print Assumptions`` by origin,
the statement's type compared) — the session that found the proof is not trusted. A search is ``proved``
only when that verdict is ``valid``, else ``unsound`` with the verdict's reasons; "no goals" in the session
is never enough (reap's ``checkProof`` / ``_step_check``, BFS-Prover-V2's fresh-Dojo ``validate_proof``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..provers.base import Message, Prover, Status, Theorem, Verdict
from .trace import Tracer


def script_text(script: Sequence[str]) -> str:
    """The proof as one text: sentences one a line, indented by block depth."""
    out, depth = [], 0
    for s in script:
        if s == "}":
            depth -= 1
        out.append("  " * max(depth, 0) + s)
        if s == "{":
            depth += 1
    return "\n".join(out)


def final_verdict(
    prover: Prover,
    theorem: Theorem,
    script: Sequence[str],
    *,
    timeout: float | None = None,
    tracer: Tracer | None = None,
) -> Verdict:
    """``prover.final_check`` over ``script`` in a fresh process; never raises (a broken check is a verdict)."""
    tracer = tracer or Tracer()
    with tracer.span("final_check", sentences=len(script)) as info:
        if not script:
            v = Verdict(Status.REJECTED, ("empty proof",))
        else:
            try:
                v = prover.final_check(theorem, list(script), timeout=timeout)
            except Exception as e:  # the judge failing is not a proof
                v = Verdict(
                    Status.ERROR,
                    (f"final check failed to run: {type(e).__name__}",),
                    (Message("error", str(e)[-2000:]),),
                )
        info["status"] = v.status.value
        info["reasons"] = list(v.reasons)
    return v
