"""``proofrl filter``: kimina-prover-rl's prompt-set curation end to end, from a base model and a problem set.

kimina-prover-rl trains on problems its model does not already solve: it drops every problem with a win rate
above 0.5 over past samples and repeats the hard ones (:func:`proofrl.data.splits.kimina_filter`, where the rule
and its defaults are). This module measures the win rates that rule needs: each problem sampled ``n`` times
(kimina: 8 rollouts) by the base model (:func:`~proofrl.eval.evaluate.evaluate`, the one sample-and-verify
path), every sample judged by the verifier, the win rate the share judged valid.

Files in ``out``:

* ``win_rates.jsonl``: one line per problem (``key``, ``wins``, ``samples``, ``win_rate``), appended after each
  chunk of problems, so a killed run resumes where it stopped (a problem whose line is there is not sampled
  again; a run with another ``n`` or model is refused in one line, as its rates would not compare);
* ``filtered.jsonl``: the problems kept, hard ones repeated, in the problem format ``proofrl train`` reads
  (``--set data.train=OUT/filtered.jsonl``);
* ``summary.json``: counts (sampled, dropped as easy, kept once, repeated), the rule's settings and seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..problems import Problem, save_problems

RATES, FILTERED, SUMMARY, RUN = "win_rates.jsonl", "filtered.jsonl", "summary.json", "run.json"


@dataclass(frozen=True)
class FilterRule:
    """kimina's rule (:func:`~proofrl.data.splits.kimina_filter`): drop a win rate above ``max_win_rate``, repeat
    one below ``duplicate_below`` ``copies`` times (None: never)."""

    max_win_rate: float = 0.5
    duplicate_below: float | None = 0.25
    copies: int = 2


def read_rates(path: Path) -> dict[str, dict[str, Any]]:
    """The win-rate lines written so far (a line cut by a kill is skipped: that problem is sampled again)."""
    out: dict[str, dict[str, Any]] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
                out[rec["key"]] = rec
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
    return out


def measure_and_filter(
    problems: Sequence[Problem],
    sample_and_judge: Callable[[Sequence[Problem]], list[list[bool]]],
    out: Path,
    *,
    n: int,
    run_key: dict[str, Any],
    rule: FilterRule = FilterRule(),
    chunk: int = 4,
    on_problems: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Win rates of ``problems`` (``sample_and_judge(chunk)`` returns each problem's ``n`` verdicts, True where
    valid), then the filtered set; resumes from ``out/win_rates.jsonl`` when ``run_key`` (model, ``n``, sampling
    settings) matches the one recorded in ``out/run.json``. Returns the summary."""
    from ..data.splits import kimina_filter

    if not problems:
        raise ConfigError("no problems to filter")
    keys = [p.key for p in problems]
    if len(set(keys)) < len(keys):
        raise ConfigError("the problem set names a problem twice; filter a set of distinct problems")
    out.mkdir(parents=True, exist_ok=True)
    run_path = out / RUN
    key = {**run_key, "n": n}
    if run_path.is_file():
        old = json.loads(run_path.read_text())
        if old != key:
            diff = sorted(k for k in set(old) | set(key) if old.get(k) != key.get(k))
            raise ConfigError(
                f"{out} holds win rates of another run ({', '.join(diff)} differ); give another --out or delete it"
            )
    else:
        run_path.write_text(json.dumps(key, indent=2))
    rates = read_rates(out / RATES)
    todo = [p for p in problems if p.key not in rates]
    t0 = time.perf_counter()
    with open(out / RATES, "a", encoding="utf-8") as f:
        if on_problems is not None and len(todo) < len(problems):
            on_problems(len(problems) - len(todo))
        for i in range(0, len(todo), chunk):
            part = todo[i : i + chunk]
            verdicts = sample_and_judge(part)
            for p, correct in zip(part, verdicts, strict=True):
                wins, samples = sum(correct), len(correct)
                rec = {"key": p.key, "wins": wins, "samples": samples, "win_rate": wins / max(1, samples)}
                rates[p.key] = rec
                f.write(json.dumps(rec) + "\n")
            f.flush()
            if on_problems is not None:
                on_problems(len(part))
    win = {k: r["win_rate"] for k, r in rates.items()}
    kept = kimina_filter(
        problems, win, max_win_rate=rule.max_win_rate, duplicate_below=rule.duplicate_below, copies=rule.copies
    )
    save_problems(kept, out / FILTERED)
    easy = sum(win[k] > rule.max_win_rate for k in keys)
    repeated = sum(rule.duplicate_below is not None and win[k] < rule.duplicate_below for k in keys)
    summary = {
        "problems": len(problems),
        "sampled_now": len(todo),
        "samples_per_problem": n,
        "dropped_as_easy": easy,
        "kept_once": len(problems) - easy - repeated,
        "repeated": repeated,
        "filtered_set": len(kept),
        "mean_win_rate": sum(win[k] for k in keys) / len(keys),
        "rule": {"max_win_rate": rule.max_win_rate, "duplicate_below": rule.duplicate_below, "copies": rule.copies},
        "seconds": round(time.perf_counter() - t0, 2),
    }
    (out / SUMMARY).write_text(json.dumps(summary, indent=2))
    return summary
