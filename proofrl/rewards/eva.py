"""EVA (Expected Value Alignment, the *Leibniz* process reward model): a generative critic whose continuous
score is read from the logits of its own score digits.

The reward model writes a critique, then a JSON line ``{"logic_score":4,"align_score":2,"clarity_score":3}``.
At the position that predicts each score digit, EVA takes the logits z of the anchor tokens
𝒜 = {"1", …, "5"} only and computes (paper, eqs. 2–3)::

    P(i) = exp(z_{v_i} / τ) / Σ_{j ∈ 𝒜} exp(z_{v_j} / τ),      E[R] = Σ_i i · P(i)      (τ = 1)

:func:`expected_score` is the one place of this formula (training, evaluation and search all call it).
The combined score is a weighted mean of the dimensions (:func:`combined_score`, equal weights by default).

* **Exact score-token indexing** (paper §4.3): :func:`score_token_positions` finds each ``"<dim>_score": d``
  by regex on the rendered target, maps the digit's character to its token with the fast tokenizer's
  ``char_to_token``, and the logits that *predict* it sit at index − 1 (a causal LM predicts token t from the
  hidden state at t − 1). A digit merged with a quote, colon or space into one token is not an anchor: the
  position is refused (:class:`ScorePositionError`) — the paper's limitation, handled by counting the
  example out of the EVA loss rather than by reading a wrong logit.
* **Anchors** must each be one token of the tokenizer (:func:`anchor_token_ids`), else a
  :class:`~proofrl.errors.ConfigError` names the tokenizer.
* **Scoring** (:class:`EvaScorer`): greedy decoding (the paper's T = 0), the JSON parsed from the text
  (textual scores, flagged when missing, out of 1–5 or not JSON), then one forward pass over prompt +
  output reads E[R] at the score positions. A dimension the text lacks is still scored from the logits at a
  probe ``"<dim>_score":`` appended to the output, and flagged.
* **In search** (:func:`value_fn_from_dir`, ``--value eva:DIR``): a state's value is
  V(s) = (max_t S(s, t) − 5) / 4 over the tactic policy's top-k proposals t (S the combined E[R] ∈ [1, 5]):
  EVA judges steps, so a state is worth its best next step. The map sends a perfect step to 0 (the value of
  a solved state in the search's convention, higher is better ≈ −steps to go) and the worst to −1
  (:class:`~proofrl.policy.tactic.NoValue`'s "at least one more step"). :class:`EvaPriorityPolicy` wraps a
  tactic policy so that best-first search (and MCTS priors) rank tactics by EVA instead of log-prob.
* **Step reward** ``eva`` in :data:`~proofrl.rewards.combine.STEP_REWARDS`: (S − 1) / 4 ∈ [0, 1].
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..errors import ConfigError
from .combine import STEP_REWARDS

ANCHORS: tuple[str, ...] = ("1", "2", "3", "4", "5")
"""𝒜, the paper's anchor set"""
DIMENSIONS: tuple[str, ...] = ("logic", "align", "clarity")
"""Leibniz's three scores: Logic, Alignment, Clarity"""
CONFIG_FILE = "eva_config.json"
"""written next to a trained reward model: dimensions, anchors, τ, weights, prompt limits, the policy used"""


def score_key(dim: str) -> str:
    return f"{dim}_score"


# -- the formula ----------------------------------------------------------------------------------------------


def expected_score(
    logits: torch.Tensor,
    anchor_ids: Sequence[int] | torch.Tensor,
    tau: float = 1.0,
    values: Sequence[float] | None = None,
) -> torch.Tensor:
    """E[R] = Σ_i i · softmax(z_𝒜 / τ)_i over the last axis of ``logits`` (… , V) → (…).

    ``anchor_ids`` are the vocabulary ids v_1 … v_K of the anchors; ``values`` their numbers (default 1 … K).
    Computed in float32 whatever the logits' dtype (bf16 logits would quantise the expectation)."""
    if tau <= 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    ids = torch.as_tensor(anchor_ids, dtype=torch.long, device=logits.device)
    vals = (
        torch.arange(1, len(ids) + 1, dtype=torch.float32, device=logits.device)
        if values is None
        else torch.as_tensor(values, dtype=torch.float32, device=logits.device)
    )
    z = logits.index_select(-1, ids).float() / tau
    return (torch.softmax(z, dim=-1) * vals).sum(-1)


def combined_score(scores: Mapping[str, float], weights: Mapping[str, float] | None = None) -> float:
    """Σ_k w_k · E[R_k] / Σ_k w_k over the dimensions present (equal weights by default)."""
    w = {k: (1.0 if weights is None else float(weights.get(k, 0.0))) for k in scores}
    total = sum(w.values())
    if total <= 0:
        raise ValueError(f"weights {weights} give no dimension of {list(scores)} a positive weight")
    return sum(w[k] * float(v) for k, v in scores.items()) / total


def to_value(score: float) -> float:
    """EVA's combined score S ∈ [1, 5] as a search value: (S − 5) / 4 ∈ [−1, 0] (see the module docstring)."""
    return (float(score) - 5.0) / 4.0


def anchor_token_ids(tokenizer: Any, anchors: Sequence[str] = ANCHORS) -> list[int]:
    """The vocabulary id of each anchor; a :class:`ConfigError` naming the tokenizer when one is not a single
    token (the paper's limitation: choose other anchors or another tokenizer)."""
    ids = []
    for a in anchors:
        toks = tokenizer(a, add_special_tokens=False)["input_ids"]
        if len(toks) != 1:
            name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
            raise ConfigError(
                f"EVA anchor {a!r} is {len(toks)} tokens {toks} in tokenizer {name!r}; every anchor "
                f"must be a single token (pick other anchors or another tokenizer)"
            )
        ids.append(toks[0])
    if len(set(ids)) != len(ids):
        raise ConfigError(
            f"EVA anchors {list(anchors)} share token ids {ids} in tokenizer {getattr(tokenizer, 'name_or_path', '')!r}"
        )
    return ids


# -- the rendered target and its score positions ----------------------------------------------------------------


def render_scores(scores: Mapping[str, float], dims: Sequence[str] = DIMENSIONS) -> str:
    """The JSON the model writes: integer scores (the continuous targets rounded, clipped to 1–5), compact —
    no space after the colon, so a byte-level BPE cannot merge the digit with it (``Ġ4``)."""
    body = ",".join(f'"{score_key(d)}":{min(5, max(1, math.floor(float(scores[d]) + 0.5)))}' for d in dims)
    return "{" + body + "}"


def render_target(critique: str, scores: Mapping[str, float], dims: Sequence[str] = DIMENSIONS) -> str:
    """What the reward model is taught to write: the critique, a newline, the JSON scores."""
    return f"{critique.strip()}\nScores: {render_scores(scores, dims)}"


def _value_pattern(key: str) -> re.Pattern[str]:
    return re.compile(r'"' + re.escape(key) + r'"\s*:\s*"?(-?\d+(?:\.\d+)?)')


class ScorePositionError(ValueError):
    """A score's token position could not be fixed exactly: ``reason`` is ``missing``, ``ambiguous``,
    ``not-an-anchor`` (the digit shares its token with other characters) or ``truncated``."""

    def __init__(self, key: str, reason: str, detail: str = ""):
        super().__init__(f"{key}: {reason}" + (f" ({detail})" if detail else ""))
        self.key, self.reason = key, reason


def score_token_positions(
    text: str, tokenizer: Any, keys: Sequence[str], *, encoding: Any = None, anchor_ids: Sequence[int] | None = None
) -> dict[str, int]:
    """``{key: index of the token that IS the score digit}`` in ``tokenizer(text)`` (no special tokens), found
    by regex on ``text`` and ``char_to_token``; the logits that predict it are at index − 1.

    Raises :class:`ScorePositionError` when a key is missing, matches twice (ambiguous), or its digit is not
    a token of its own (merged with a quote, colon or space, or with a following digit), or, with
    ``anchor_ids``, is not an anchor token."""
    enc = encoding if encoding is not None else tokenizer(text, add_special_tokens=False)
    out: dict[str, int] = {}
    for key in keys:
        matches = list(_value_pattern(key).finditer(text))
        if not matches:
            raise ScorePositionError(key, "missing")
        if len(matches) > 1:
            raise ScorePositionError(key, "ambiguous", f"{len(matches)} matches")
        m = matches[0]
        start, end = m.span(1)
        if end - start != 1:
            raise ScorePositionError(key, "not-an-anchor", f"value {m.group(1)!r} is not one digit")
        idx = enc.char_to_token(start)
        if idx is None:
            raise ScorePositionError(key, "missing", "no token covers the digit")
        span = enc.token_to_chars(idx)
        s, e = (span.start, span.end) if hasattr(span, "start") else span
        if (s, e) != (start, end):
            raise ScorePositionError(key, "not-an-anchor", f"the digit shares token {idx} ({text[s:e]!r})")
        if anchor_ids is not None and enc["input_ids"][idx] not in set(anchor_ids):
            raise ScorePositionError(key, "not-an-anchor", f"token {enc['input_ids'][idx]} is not an anchor")
        out[key] = idx
    return out


def gather_positions(logits: torch.Tensor, rows: Sequence[int], positions: Sequence[int]) -> torch.Tensor:
    """``logits[rows[j], positions[j] − 1]`` for each j → (J, V): the logits that predict each score digit
    (``positions`` are indices of the digit tokens in the padded rows)."""
    r = torch.as_tensor(list(rows), dtype=torch.long, device=logits.device)
    p = torch.as_tensor(list(positions), dtype=torch.long, device=logits.device) - 1
    return logits[r, p]


# -- parsing a generated output ------------------------------------------------------------------------------------

_JSON = re.compile(r"\{[^{}]*\}")


@dataclass
class ParsedScores:
    """The textual scores of one output: ``scores`` (only the dimensions read, clipped to 1–5) and ``flags``:
    ``invalid-json`` (no JSON object parsed), ``missing:<dim>``, ``out-of-range:<dim>``."""

    scores: dict[str, float] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)


def parse_scores(text: str, dims: Sequence[str] = DIMENSIONS) -> ParsedScores:
    """Read the last JSON object of ``text``; a dimension absent from it is looked for by regex anywhere."""
    out = ParsedScores()
    obj: dict[str, Any] = {}
    for m in reversed(list(_JSON.finditer(text))):
        try:
            cand = json.loads(m.group(0))
        except ValueError:
            continue
        if isinstance(cand, dict):
            obj = cand
            break
    if not obj:
        out.flags.append("invalid-json")
    for d in dims:
        raw: Any = obj.get(score_key(d))
        if raw is None:
            m2 = list(_value_pattern(score_key(d)).finditer(text))
            raw = m2[-1].group(1) if m2 else None
        try:
            v = float(raw) if raw is not None else None
        except (TypeError, ValueError):
            v = None
        if v is None or not math.isfinite(v):
            out.flags.append(f"missing:{d}")
            continue
        if not 1.0 <= v <= 5.0:
            out.flags.append(f"out-of-range:{d}")
            v = min(5.0, max(1.0, v))
        out.scores[d] = v
    return out


# -- the reward model's prompt -------------------------------------------------------------------------------------

INSTRUCTION = (
    "Judge the proposed tactic for the proof state below. Write a short critique, then the scores "
    "1-5 as JSON: logic (is the step correct), align (does it fit this goal), clarity (is it well formed)."
)


def rm_prompt(state: str, proposal: str, instruction: str = INSTRUCTION, max_state_chars: int = 600) -> str:
    """The reward model's prompt: instruction, tactic state (its end kept when too long: the conclusion is
    last), the proposal."""
    state = state.strip()
    if len(state) > max_state_chars:
        state = "…" + state[len(state) - max_state_chars :]
    return f"{instruction}\n[STATE]\n{state}\n[PROPOSAL]\n{proposal.strip()}\n[CRITIQUE]\n"


# -- scoring with a trained model ----------------------------------------------------------------------------------


@dataclass
class EvaScore:
    """One judged (state, proposal): ``expected`` E[R] per dimension, ``text`` the textual scores read (may
    lack dimensions), ``combined`` the weighted E[R], ``flags`` what went wrong in the text, ``output`` it."""

    expected: dict[str, float]
    text: dict[str, float]
    combined: float
    flags: list[str]
    output: str


class EvaScorer:
    """A reward model (any causal LM directory, LoRA adapters included) judging (state, proposal) pairs with
    greedy decoding, E[R] read from the same model's logits."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        dims: Sequence[str] = DIMENSIONS,
        tau: float = 1.0,
        weights: Mapping[str, float] | None = None,
        max_new_tokens: int = 96,
        max_state_chars: int = 600,
        batch_size: int = 16,
        instruction: str = INSTRUCTION,
    ):
        self.model, self.tokenizer = model, tokenizer
        self.dims, self.tau, self.weights = tuple(dims), tau, dict(weights) if weights else None
        self.anchor_ids = anchor_token_ids(tokenizer)
        self.max_new_tokens, self.max_state_chars, self.batch_size = max_new_tokens, max_state_chars, batch_size
        self.instruction = instruction

    @classmethod
    def from_dir(cls, path: str | Path, *, device: str | None = None, **kw: Any) -> EvaScorer:
        from ..policy.model import load_policy

        path = Path(path)
        cfg = json.loads((path / CONFIG_FILE).read_text()) if (path / CONFIG_FILE).is_file() else {}
        model, tok = load_policy(path, device=device)
        settings = {k: cfg[k] for k in ("dims", "tau", "weights", "max_state_chars") if k in cfg}
        return cls(model, tok, **(settings | kw))

    def prompt(self, state: str, proposal: str) -> str:
        return rm_prompt(state, proposal, self.instruction, self.max_state_chars)

    @torch.no_grad()
    def generate(self, prompts: Sequence[str]) -> list[str]:
        """Greedy outputs (the paper's T = 0: the score tokens are conditioned on the critique, so sampling
        would move the extracted reward). The prompt keeps its end when it is longer than the model allows."""
        from ..policy.generation import encode_prompts
        from ..policy.logprobs import left_pad

        limit = getattr(self.model.config, "max_position_embeddings", None)
        keep = None if limit is None else max(8, limit - self.max_new_tokens)
        rows = [r[-keep:] if keep else r for r in encode_prompts(self.tokenizer, prompts)]
        eos = self.model.generation_config.eos_token_id
        eos = sorted(set(eos if isinstance(eos, list) else [eos or self.tokenizer.eos_token_id]))
        pad = self.tokenizer.pad_token_id
        device = next(self.model.parameters()).device
        was_training = self.model.training
        self.model.eval()
        outs: list[str] = []
        try:
            for s in range(0, len(rows), self.batch_size):
                ids, mask = left_pad(rows[s : s + self.batch_size], pad, device)
                gen = self.model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    do_sample=False,
                    num_beams=1,
                    max_new_tokens=self.max_new_tokens,
                    eos_token_id=eos,
                    pad_token_id=pad,
                    top_k=None,
                    top_p=None,
                    temperature=None,
                )
                for r in gen[:, ids.shape[1] :].tolist():
                    end = next((j for j, t in enumerate(r) if t in eos), len(r))
                    outs.append(self.tokenizer.decode(r[:end], skip_special_tokens=True))
        finally:
            self.model.train(was_training)
        return outs

    @torch.no_grad()
    def read_expected(self, prompts: Sequence[str], outputs: Sequence[str]) -> list[tuple[dict[str, float], list[str]]]:
        """E[R] per dimension of each (prompt, output), from one forward pass over prompt + output (+ a probe
        ``"<dim>_score":`` appended for each dimension whose position the output lacks); flags name the probed
        ones (``probed:<dim>:<reason>``)."""
        from ..policy.generation import encode_prompts
        from ..policy.logprobs import left_pad, position_ids

        rows, where, flags = [], [], []
        p_ids = encode_prompts(self.tokenizer, prompts)
        for pi, out in zip(p_ids, outputs, strict=True):
            enc = self.tokenizer(out, add_special_tokens=False)
            row, w, f = list(pi) + list(enc["input_ids"]), {}, []
            for d in self.dims:
                try:
                    w[d] = (
                        len(pi)
                        + score_token_positions(
                            out, self.tokenizer, [score_key(d)], encoding=enc, anchor_ids=self.anchor_ids
                        )[score_key(d)]
                    )
                except ScorePositionError as e:
                    # Scored from the logits anyway: the dimension's key is appended after the output, and the
                    # logits at its last token predict the digit (causal: the output's own positions are unchanged).
                    f.append(f"probed:{d}:{e.reason}")
                    row += self.tokenizer(f' "{score_key(d)}":', add_special_tokens=False)["input_ids"]
                    w[d] = len(row)  # where the digit would go; a placeholder anchor fills it
                    row.append(self.anchor_ids[0])
            rows.append(row)
            where.append(w)
            flags.append(f)
        limit = getattr(self.model.config, "max_position_embeddings", None)
        out_scores: list[tuple[dict[str, float], list[str]]] = []
        device = next(self.model.parameters()).device
        for s in range(0, len(rows), self.batch_size):
            chunk = rows[s : s + self.batch_size]
            cut = [max(0, len(r) - limit) if limit else 0 for r in chunk]  # keep the end (the scores)
            chunk = [r[c:] for r, c in zip(chunk, cut, strict=True)]
            ids, mask = left_pad(chunk, self.tokenizer.pad_token_id, device)
            logits = self.model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask)).logits
            width = ids.shape[1]
            for j, r in enumerate(chunk):
                off = width - len(r) - cut[j]  # left padding shifts every index; the cut removes the first ones
                w = where[s + j]
                z = gather_positions(logits, [j] * len(self.dims), [max(1, w[d] + off) for d in self.dims])
                exp = expected_score(z, self.anchor_ids, self.tau)
                out_scores.append(({d: float(x) for d, x in zip(self.dims, exp.tolist(), strict=True)}, flags[s + j]))
        return out_scores

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[EvaScore]:
        """Judge each (state, proposal): generate greedily, parse the text, read E[R] from the logits."""
        prompts = [self.prompt(s, p) for s, p in pairs]
        outputs = self.generate(prompts)
        res = []
        for out, (exp, f) in zip(outputs, self.read_expected(prompts, outputs), strict=True):
            parsed = parse_scores(out, self.dims)
            res.append(EvaScore(exp, parsed.scores, combined_score(exp, self.weights), parsed.flags + f, out))
        return res


# -- in search ---------------------------------------------------------------------------------------------------


class EvaValue:
    """A search :class:`~proofrl.policy.tactic.ValueFn`: V(s) = (max_t S(s, t) − 5) / 4 over the policy's top
    ``k`` proposals t at s (see the module docstring); a state with no proposal is worth −1."""

    def __init__(self, scorer: EvaScorer, policy: Any, *, k: int = 4):
        self.scorer, self.policy, self.k = scorer, policy, k
        self.name = "eva"

    def value(self, state_text: str) -> float:
        props = self.policy.propose(state_text, self.k)
        if not props:
            return -1.0
        return to_value(max(s.combined for s in self.scorer.score([(state_text, p.tactic) for p in props])))


class EvaPriorityPolicy:
    """A tactic policy whose proposals are ranked by EVA: each proposal's ``logprob_sum`` and ``logprob_mean``
    become log((S − 1)/4 + ε) + ``mix`` · its own log-prob, so best-first's Σ log-prob priority (and MCTS's
    exp(Σ / τ) prior) follow the critic (``mix`` = 0: EVA alone)."""

    def __init__(self, policy: Any, scorer: EvaScorer, *, mix: float = 0.0, eps: float = 1e-3):
        self.policy, self.scorer, self.mix, self.eps = policy, scorer, mix, eps
        self.name = f"eva+{getattr(policy, 'name', 'policy')}"

    def propose(self, state_text: str, k: int) -> list[Any]:
        from ..policy.tactic import Proposal

        props = self.policy.propose(state_text, k)
        if not props:
            return []
        scores = self.scorer.score([(state_text, p.tactic) for p in props])
        out = []
        for p, s in zip(props, scores, strict=True):
            lp = math.log((s.combined - 1.0) / 4.0 + self.eps)
            out.append(
                Proposal(p.tactic, lp + self.mix * p.logprob_sum, lp + self.mix * p.logprob_mean, p.tokens, p.count)
            )
        return sorted(out, key=lambda p: -p.logprob_sum)


def value_fn_from_dir(path: str, *, policy: Any = None, k: int = 4, device: str | None = None, **kw: Any) -> EvaValue:
    """``--value eva:DIR``: the reward model in DIR as a search value. The tactic policy that proposes the
    steps EVA judges is ``policy`` (an object or a ``hf:DIR``-style spec), else the one named in DIR's
    ``eva_config.json`` (``policy``)."""
    d = Path(path)
    if not d.is_dir():
        raise ConfigError(f"eva:{path}: no reward model directory there")
    if policy is None:
        cfg = json.loads((d / CONFIG_FILE).read_text()) if (d / CONFIG_FILE).is_file() else {}
        policy = cfg.get("policy")
        if not policy:
            raise ConfigError(
                f"eva:{path}: EVA judges steps, so its value needs a tactic policy; none given and "
                f"{CONFIG_FILE} names none (train with policy=hf:DIR)"
            )
    if isinstance(policy, str):
        from ..policy.tactic import make_tactic_policy

        policy = make_tactic_policy(policy, device=device, seed=0)
    return EvaValue(EvaScorer.from_dir(d, device=device, **kw), policy, k=k)


# -- step reward -------------------------------------------------------------------------------------------------


@STEP_REWARDS.register("eva")
def eva_step_reward(before: Any, result: Any, *, scorer: EvaScorer | Callable[..., Any], **_: Any) -> float:
    """EVA's score of the step ``result.tactic`` at state ``before`` as a reward in [0, 1]: (S − 1) / 4."""
    from ..provers.backend import state_text

    s = scorer.score([(state_text(before), result.tactic)])[0]  # type: ignore[union-attr]
    return (s.combined - 1.0) / 4.0
