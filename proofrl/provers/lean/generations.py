"""REPL generations: which response shapes a Lean REPL speaks, by the toolchain it was built with.

leanprover-community/repl changed its answers over the Lean toolchains users pin (DeepSeek-Prover-V1.5 uses
v4.9, most published provers something between v4.9 and v4.19). Two generations differ in what the verdict
rules need:

* :data:`CURRENT` (toolchains from ``v4.19``): a tactic answer carries ``proofStatus`` (``Completed``,
  ``Incomplete: open goals remain``, ``Incomplete: contains sorry``/``metavariable(s)``,
  ``Error: kernel type check failed``), so a closing step is confirmed or refused by Lean itself;
* :data:`LEGACY` (``nightly-2023-03-17`` to ``v4.18``): a tactic answer is ``{"proofState", "goals"}`` with
  optional ``messages``/``sorries``/``traces`` and no ``proofStatus``. ``goals: []`` then cannot tell a
  finished proof from a kernel failure, a leftover metavariable or a sorry an earlier step left in the term,
  so a closing step is never taken as solved from this answer alone (:func:`.rules.judge_step`; the prover
  confirms it as a whole command). Infotree syntax may lack ``kind`` (``{"pp", "range"}``, up to v4.8), and
  ``allTactics`` records may lack ``usedConstants`` (up to v4.7).

Command answers (``env``, ``messages``, ``sorries``, ``tactics``, ``infotree``) and ``{"message"}`` errors are
the same in both. Each generation is strict: a key it does not know is an error, never dropped.

The framing changed too, in every generation alike: the earliest REPLs ended an answer with one newline, later
ones with a blank line, so the session reads one JSON value whatever follows it (:mod:`.session`).

A user names the toolchain (``LeanConfig.version``, ``PROOFRL_LEAN_VERSION``: ``v4.9.0``, ``v4.9.0-rc1``,
``leanprover/lean4:v4.9.0`` as in ``lean-toolchain``, ``nightly-2023-03-17``) or leaves it out, and the session
narrows the candidates to the generations whose shapes the REPL's own answers fit (the first tactic answer
decides; a later answer that fits no remaining candidate is an error).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import ConfigError


@dataclass(frozen=True)
class Generation:
    """The response shapes of one REPL generation (keys beyond ``required`` that each object may carry)."""

    name: str
    first: tuple[int, int]
    """the first toolchain ``(major, minor)`` of this generation"""
    step_required: frozenset[str]
    step_optional: frozenset[str]
    syntax_required: frozenset[str]
    syntax_optional: frozenset[str]
    tactic_record_required: frozenset[str]
    tactic_record_optional: frozenset[str]

    @property
    def has_proof_status(self) -> bool:
        return "proofStatus" in self.step_required

    def __str__(self) -> str:
        return self.name


_F = frozenset
CURRENT = Generation(
    "v4.19+",
    (4, 19),
    step_required=_F({"proofState", "goals", "proofStatus"}),
    step_optional=_F({"messages", "sorries", "traces"}),
    syntax_required=_F({"pp", "kind"}),
    syntax_optional=_F({"range", "argKinds"}),
    tactic_record_required=_F({"tactic", "goals", "pos", "endPos"}),
    tactic_record_optional=_F({"proofState", "usedConstants"}),
)
LEGACY = Generation(
    "v4.2-v4.18",
    (0, 0),
    step_required=_F({"proofState", "goals"}),
    step_optional=_F({"messages", "sorries", "traces"}),
    syntax_required=_F({"pp"}),
    syntax_optional=_F({"kind", "range", "argKinds"}),
    tactic_record_required=_F({"tactic", "goals", "pos", "endPos"}),
    tactic_record_optional=_F({"proofState", "usedConstants"}),
)
GENERATIONS = (CURRENT, LEGACY)
"""newest first: a response both fit is read by the newest"""

_VERSION = re.compile(r"^(?:leanprover/lean4:)?v?(\d+)\.(\d+)(?:\.\d+)?(?:-rc\d+)?$")
_NIGHTLY = re.compile(r"^(?:leanprover/lean4:)?nightly-(\d{4})-(\d{2})-(\d{2})$")


def toolchain_key(version: str) -> tuple[int, int]:
    """``(major, minor)`` of a toolchain name; a nightly counts as before ``v4.0``. Raises
    :class:`~proofrl.errors.ConfigError` (one line) for a name that is neither."""
    v = version.strip()
    if m := _VERSION.match(v):
        return int(m.group(1)), int(m.group(2))
    if _NIGHTLY.match(v):
        return (0, 0)
    raise ConfigError(
        f"lean version {version!r}: expected a toolchain such as v4.9.0, v4.19.0-rc2, "
        f"leanprover/lean4:v4.15.0 or nightly-2023-03-17"
    )


def generation_for(version: str) -> Generation:
    """The generation of the REPL built with toolchain ``version``."""
    key = toolchain_key(version)
    return next(g for g in GENERATIONS if key >= g.first)


def candidates(version: str | None) -> tuple[Generation, ...]:
    """The generations a session starts with: the named toolchain's, or all of them (detect)."""
    return GENERATIONS if version is None else (generation_for(version),)
