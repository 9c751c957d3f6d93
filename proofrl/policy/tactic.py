"""The tactic policy and the value function that proof search calls: state text in, tactics (or a value) out.

* **Prompt** (ReProver / BFS-Prover style): ``[GOAL]\\n<state>\\n[PROOFSTEP]\\n`` and the model answers one
  tactic, ended by EOS (:func:`tactic_prompt`). ``<state>`` is :func:`proofrl.provers.backend.state_text` of a
  prover state (the same text the tactic data holds in ``state_before``). A model taught with retrieved context
  (:mod:`proofrl.policy.retrieval`) reads the nearest remembered tactics and premises before ``[GOAL]``.
* **Proposals**: :class:`TacticPolicy` ``.propose(state_text, k)`` samples ``k`` tactics and returns them as
  :class:`Proposal` ``(tactic, logprob_sum, logprob_mean)``, deduplicated and sorted by ``logprob_sum``,
  best first. Backends: a local HF model (:class:`HFTacticPolicy`, sampling or beam search), vLLM
  (:class:`VLLMTacticPolicy`), any OpenAI-compatible endpoint (:class:`OpenAITacticPolicy`:
  ``/v1/completions`` or ``/v1/chat/completions`` with ``n`` and ``logprobs``, as reap calls its policy
  service). :func:`make_tactic_policy` builds one from ``hf:DIR`` / ``vllm:DIR`` / ``openai:URL`` /
  ``openai-chat:URL``, and any policy spec: a proof memory (``knn:DIR``), the automation menu (``auto``), several
  sources joined by ``+`` (:mod:`proofrl.policy.sources`, where :class:`Proposal` and :class:`TacticPolicy` are
  defined; this module re-exports them).
* **Merging duplicates**: samples whose cleaned tactic strings are equal become one proposal. Its
  ``logprob_sum`` is the logsumexp of the log-probabilities of the *distinct token sequences* among them,
  ``log Σ_seq exp(logprob_sum_seq)``: the probability that the model writes this tactic string, summed over
  the spellings it was seen in (beam search, different tokenisations, whitespace). The same sequence drawn
  m times counts once (its probability is p, not m·p; a sum that could pass 0 would break cumulative
  log-prob priorities); ``count`` = m keeps the frequency for callers that want reap's rule of *adding*
  the priors of a repeated tactic. Sequences are told apart by token ids, or, where a server gives none,
  by their per-token log-probs. ``logprob_mean`` is ``logprob_sum / tokens`` with the token count of the
  first sample, so sum and mean always agree. A completion cut by ``max_tokens`` is dropped (half a tactic
  is not a tactic), so fewer than ``k`` proposals, or none, can come back.
* **Values**: :class:`ValueFn` ``.value(state_text) -> float`` in reap's / AlphaProof's convention: higher is
  better, about minus the tactic steps still needed, 0 for a solved state. :class:`NoValue` (no value
  model) returns ``-1.0`` for every state; :class:`EndpointValue` POSTs ``{"state": ...}`` and reads
  ``{"score": x}`` (reap's value service; the value is ``-x`` as reap uses it); :class:`ModelHeadValue` is
  the hook a value head plugs into (the expert-iteration issue).

* **Seeds**: a policy built with ``seed`` samples its i-th call under ``seed + i``. Inside
  :func:`sampling_stream` ``(key)`` the i-th call *of that stream* samples under
  :func:`call_seed` ``(seed, key, i)`` instead: :func:`~proofrl.search.run.search_many` opens one stream per
  theorem, so a theorem's samples depend on the seed, the theorem and how far its own search has gone, never on
  the order in which concurrent searches reach the shared model (which Coq worker answered first).

Errors: an endpoint that refuses, answers garbage, or dies raises :class:`PolicyEndpointError` (a
:class:`~proofrl.policy.generation.GenerationError`) naming the URL; the search keeps what it has.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx

from ..errors import ConfigError
from .generation import Completion, GenerationError, OpenAIGenerator, SamplingConfig, openai_sampling
from .retrieval import CONTEXT_FILE, Context, Retriever, save_shape, taught_shape
from .sources import MODEL_KINDS, MixedPolicy, Proposal, TacticPolicy, automation_menu, spec_parts
from .sources import propose_batch as propose_batch  # (re-exported: the search and tests import it from here)

GOAL_TAG, PROOFSTEP_TAG = "[GOAL]", "[PROOFSTEP]"


def tactic_prompt(state_text: str, context: Context | None = None) -> str:
    """``[GOAL]\\n<state>\\n[PROOFSTEP]\\n``: ReProver's tags (its ``[GOAL]``/``[PROOFSTEP]`` input format),
    one state and one tactic per prompt as BFS-Prover. The model's answer is the tactic, then EOS. A retrieved
    ``context`` (:class:`~proofrl.policy.retrieval.Context`) goes first, its ``[TACTICS]``/``[PREMISES]`` blocks
    one entry a line."""
    head = context.text() if context is not None else ""
    return f"{head}{GOAL_TAG}\n{state_text.strip()}\n{PROOFSTEP_TAG}\n"


_FENCE = re.compile(r"^```[\w-]*\n(.*?)(?:\n```.*)?$", re.S)


def clean_tactic(text: str) -> str:
    """A completion as a tactic: a code fence a chat model wraps it in is removed, and so is anything after
    a following ``[GOAL]``/``[PROOFSTEP]`` tag (a model running on past its answer); surrounding whitespace
    is stripped. Empty means no tactic."""
    text = text.strip()
    if m := _FENCE.match(text):
        text = m.group(1).strip()
    for tag in (GOAL_TAG, PROOFSTEP_TAG):
        text = text.split(tag, 1)[0]
    return text.strip()


def _logaddexp(a: float, b: float) -> float:
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    hi = max(a, b)
    return hi + math.log1p(math.exp(-abs(a - b)))


def merge_proposals(samples: Sequence[tuple[Any, ...]], k: int | None = None) -> list[Proposal]:
    """``(text, per-token log-probs[, sequence key])`` samples → distinct proposals sorted by ``logprob_sum``
    (ties keep the order of first appearance), at most ``k``. Texts go through :func:`clean_tactic`; empty
    ones are dropped. Samples with the same key (default: their log-probs) are one sequence, counted once."""
    merged: dict[str, Proposal] = {}
    seen: dict[str, set] = {}
    for text, logps, *key in samples:
        tactic = clean_tactic(text)
        if not tactic:
            continue
        s, n = float(sum(logps)), len(logps)
        seq = tuple(key[0]) if key and key[0] else tuple(round(float(x), 3) for x in logps)
        if (old := merged.get(tactic)) is None:
            merged[tactic], seen[tactic] = Proposal(tactic, s, s / max(n, 1), n, 1), {seq}
        elif seq in seen[tactic]:
            merged[tactic] = Proposal(tactic, old.logprob_sum, old.logprob_mean, old.tokens, old.count + 1)
        else:
            seen[tactic].add(seq)
            total = _logaddexp(old.logprob_sum, s)
            merged[tactic] = Proposal(tactic, total, total / max(old.tokens, 1), old.tokens, old.count + 1)
    out = sorted(merged.values(), key=lambda p: -p.logprob_sum)  # stable: ties keep first appearance
    return out if k is None else out[:k]


def call_seed(seed: int, key: str, index: int) -> int:
    """The sampling seed of call ``index`` of stream ``key`` under ``seed``: a digest (blake2b, not Python's
    per-process salted ``hash``), so the same in every process, below 2**31 (what servers accept)."""
    digest = hashlib.blake2b(f"{seed}\x00{key}\x00{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % 2**31


@dataclass
class _Stream:
    key: str
    calls: int = 0


_STREAM: contextvars.ContextVar[_Stream | None] = contextvars.ContextVar("proofrl_sampling_stream", default=None)


@contextlib.contextmanager
def sampling_stream(key: str) -> Iterator[None]:
    """Within the block (in this thread or task), a seeded policy's i-th call samples under
    ``call_seed(seed, key, i)``. One stream per theorem makes a search's samples independent of what other
    threads ask the same policy meanwhile; a wrapper (EVA's ranking, a lock) calling the policy inside the
    block counts in the same stream."""
    token = _STREAM.set(_Stream(key))
    try:
        yield
    finally:
        _STREAM.reset(token)


class _SeededCalls:
    """``_next_seed()``: the seed of the next call (see the module docstring, "Seeds")."""

    seed: int | None
    _calls: int

    def _next_seed(self) -> int | None:
        if self.seed is None:
            return None
        stream = _STREAM.get()
        if stream is not None:
            stream.calls += 1
            return call_seed(self.seed, stream.key, stream.calls - 1)
        self._calls += 1
        return self.seed + self._calls - 1


class PolicyEndpointError(GenerationError):
    """The policy (or value) endpoint refused, answered something unreadable, or died."""


# -- local HF model ---------------------------------------------------------------------------------------


class HFTacticPolicy(_SeededCalls):
    """A local causal LM (``load_policy``), sampled through :class:`~proofrl.policy.generation.HFGenerator`
    (exact raw per-token log-probs), or with ``beam=True`` beam search of width k (log-probs recomputed
    exactly with :func:`~proofrl.policy.logprobs.response_logprobs`).

    ``seed``: the i-th call samples under ``seed + i``, or the stream's seed inside :func:`sampling_stream`
    (reproducible runs, yet a re-expanded state gets new samples). A state too long for the model's positions loses its
    first characters (the conclusion is at the end of a goal, so it stays).

    ``retriever``: a model taught with retrieved context (:mod:`proofrl.policy.retrieval`) gets each state's
    context from it in its prompt; the context is kept whole when a long state is cut."""

    name = "hf"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_tokens: int = 128,
        seed: int | None = 0,
        beam: bool = False,
        batch_size: int = 64,
        retriever: Retriever | None = None,
    ):
        from .generation import HFGenerator

        self.model, self.tokenizer, self.retriever = model, tokenizer, retriever
        self.temperature, self.top_p, self.max_tokens, self.seed, self.beam = temperature, top_p, max_tokens, seed, beam
        self._gen = HFGenerator(model, tokenizer, batch_size=batch_size)
        self._calls = 0
        limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        self.max_prompt_tokens = None if limit is None else max(16, limit - max_tokens)

    def prompt(self, state_text: str) -> str:
        context = self.retriever.context(state_text) if self.retriever is not None else None
        p = tactic_prompt(state_text, context)
        if self.max_prompt_tokens is None:
            return p
        while (n := len(self.tokenizer(p)["input_ids"])) > self.max_prompt_tokens and len(state_text) > 1:
            keep = min(len(state_text) - 1, int(len(state_text) * self.max_prompt_tokens / n * 0.9))
            state_text = state_text[len(state_text) - max(keep, 1) :]  # the end holds the conclusion
            p = tactic_prompt(state_text, context)
        return p

    def propose(self, state_text: str, k: int) -> list[Proposal]:
        return self.propose_many([state_text], k)[0]

    def propose_many(self, states: Sequence[str], k: int) -> list[list[Proposal]]:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        prompts = [self.prompt(s) for s in states]
        if self.beam:
            return [self._beam(p, k) for p in prompts]
        groups = self._gen.generate(
            prompts,
            SamplingConfig(
                n=k, temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens, seed=self._next_seed()
            ),
        )
        return [_proposals(g, k) for g in groups]

    def _beam(self, prompt: str, k: int) -> list[Proposal]:
        import torch

        from .generation import encode_prompts
        from .logprobs import response_logprobs

        ids = encode_prompts(self.tokenizer, [prompt])[0]
        device = next(self.model.parameters()).device
        eos = set(self._gen.eos_ids)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                out = self.model.generate(
                    input_ids=torch.tensor([ids], device=device),
                    attention_mask=torch.ones(1, len(ids), dtype=torch.long, device=device),
                    do_sample=False,
                    num_beams=k,
                    num_return_sequences=k,
                    max_new_tokens=self.max_tokens,
                    eos_token_id=sorted(eos),
                    pad_token_id=self._gen.pad_id,
                    top_k=None,
                    top_p=None,
                    temperature=None,
                    repetition_penalty=1.0,
                    no_repeat_ngram_size=0,
                    length_penalty=0.0,  # rank beams by summed log-prob
                )
                rows = []
                for r in out[:, len(ids) :].tolist():
                    end = next((j + 1 for j, t in enumerate(r) if t in eos), None)
                    if end is not None:  # a beam cut by max_tokens is not a whole tactic
                        rows.append(r[:end])
                if not rows:
                    return []
                logps, _ = response_logprobs(self.model, [ids] * len(rows), rows, pad_id=self._gen.pad_id)
        finally:
            self.model.train(was_training)
        samples = [
            (self.tokenizer.decode(r, skip_special_tokens=True), logps[i, : len(r)].tolist(), r)
            for i, r in enumerate(rows)
        ]
        return merge_proposals(samples, k)


def _proposals(completions: Sequence[Completion], k: int) -> list[Proposal]:
    """Completions cut by ``max_tokens`` are dropped (not a whole tactic); the rest merged."""
    return merge_proposals([(c.text, c.logprobs, c.token_ids) for c in completions if c.finish_reason != "length"], k)


# -- vLLM ------------------------------------------------------------------------------------------------


class VLLMTacticPolicy(_SeededCalls):
    """vLLM in this process (the GPU extra): :class:`~proofrl.policy.generation.VLLMGenerator` sampling k
    tactics per state with raw per-token log-probs. vLLM is imported only when this is built."""

    name = "vllm"

    def __init__(
        self,
        path: str | Path,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_tokens: int = 128,
        seed: int | None = 0,
        **engine_kwargs: Any,
    ):
        from .generation import VLLMGenerator

        self._gen = VLLMGenerator(path, **engine_kwargs)
        self.temperature, self.top_p, self.max_tokens, self.seed = temperature, top_p, max_tokens, seed
        self._calls = 0

    def propose(self, state_text: str, k: int) -> list[Proposal]:
        return self.propose_many([state_text], k)[0]

    def propose_many(self, states: Sequence[str], k: int) -> list[list[Proposal]]:
        params = SamplingConfig(
            n=k, temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens, seed=self._next_seed()
        )
        groups = self._gen.generate([tactic_prompt(s) for s in states], params)
        return [_proposals(g, k) for g in groups]


# -- OpenAI-compatible endpoint ----------------------------------------------------------------------------


class OpenAITacticPolicy(_SeededCalls):
    """Any OpenAI-compatible server. ``chat=False``: ``POST /v1/completions`` with the prompt, ``n=k`` and
    ``logprobs=1`` (through :class:`~proofrl.policy.generation.OpenAIGenerator`). ``chat=True``:
    ``POST /v1/chat/completions`` with one user message holding the prompt, ``n=k`` and ``logprobs: true``,
    as reap calls its policy service; each choice's ``logprobs.content[*].logprob`` are its token log-probs.

    ``system``, when given, is sent as a system message first (chat only). ``stop`` strings are passed on.
    Any failure — refused, unreadable, or the server gone — raises :class:`PolicyEndpointError` naming the
    URL and what happened."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        chat: bool = False,
        api_key: str | None = None,
        timeout: float = 600.0,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_tokens: int = 128,
        stop: tuple[str, ...] = (),
        seed: int | None = None,
        system: str | None = None,
        extra_body: dict[str, Any] | None = None,
    ):
        self.model, self.chat = model, chat
        self.temperature, self.top_p, self.max_tokens, self.stop, self.seed = (
            temperature,
            top_p,
            max_tokens,
            tuple(stop),
            seed,
        )
        self.system, self.extra_body = system, dict(extra_body or {})
        root = base_url.rstrip("/")
        root = root[: -len("/v1")] if root.endswith("/v1") else root
        self.url = root + ("/v1/chat/completions" if chat else "/v1/completions")
        self.name = f"openai{'-chat' if chat else ''}:{model}"
        self._gen = (
            None
            if chat
            else OpenAIGenerator(root, model, api_key=api_key, timeout=timeout, batch_size=64, extra_body=extra_body)
        )
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout, headers=headers) if chat else None
        self._calls = 0

    def close(self) -> None:
        if self._gen is not None:
            self._gen.close()
        if self._client is not None:
            self._client.close()

    def _params(self, k: int) -> SamplingConfig:
        return SamplingConfig(
            n=k,
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
            stop=self.stop,
            seed=self._next_seed(),
        )

    def propose(self, state_text: str, k: int) -> list[Proposal]:
        return self.propose_many([state_text], k)[0]

    def propose_many(self, states: Sequence[str], k: int) -> list[list[Proposal]]:
        params = self._params(k)
        if self._gen is not None:
            try:
                groups = self._gen.generate([tactic_prompt(s) for s in states], params)
            except GenerationError as e:  # its message names the status and body already
                err = PolicyEndpointError(f"tactic policy endpoint {self.url}: {_what(e)}")
                err.status, err.body = e.status, e.body
                raise err from e
            return [_proposals(g, k) for g in groups]
        return [_proposals(self._chat(s, params), k) for s in states]

    def _chat(self, state_text: str, params: SamplingConfig) -> list[Completion]:
        assert self._client is not None
        messages = ([{"role": "system", "content": self.system}] if self.system else []) + [
            {"role": "user", "content": tactic_prompt(state_text)}
        ]
        body = {
            "model": self.model,
            "messages": messages,
            **openai_sampling(params),
            "logprobs": True,
            **self.extra_body,
        }
        try:
            r = self._client.post(self.url, json=body)
        except httpx.HTTPError as e:
            raise PolicyEndpointError(f"tactic policy endpoint {self.url} is unreachable or died: {e!r}") from e
        if r.status_code != 200:
            raise PolicyEndpointError(
                f"tactic policy endpoint {self.url} refused the request", status=r.status_code, body=r.text
            )
        try:
            out = []
            for c in sorted(r.json()["choices"], key=lambda c: c["index"]):
                content = (c.get("logprobs") or {}).get("content") or []
                lps = tuple(float(t["logprob"]) for t in content)
                out.append(
                    Completion(
                        c["message"]["content"] or "",
                        (),
                        lps,
                        "length" if c.get("finish_reason") == "length" else "stop",
                    )
                )
        except (ValueError, KeyError, TypeError) as e:
            raise PolicyEndpointError(f"malformed chat completions reply from {self.url}: {e!r}", body=r.text) from e
        if len(out) != params.n:
            raise PolicyEndpointError(
                f"tactic policy endpoint {self.url}: expected {params.n} choices, got {len(out)}", body=r.text
            )
        return out


def _what(e: GenerationError) -> str:
    text = str(e)
    if e.status is None and "failed" in text:
        return f"unreachable or died ({text})"
    return text


# -- factory -----------------------------------------------------------------------------------------------

POLICY_KINDS = MODEL_KINDS
"""the model sources of a spec (the other sources: :data:`proofrl.policy.sources.SOURCE_KINDS`)"""


def make_tactic_policy(spec: str, *, model: str | None = None, **kw: Any) -> TacticPolicy:
    """The policy a spec names: ``hf:DIR`` (a local model directory; ``device``, ``beam``, sampling settings in
    ``kw``), ``vllm:DIR``, ``openai:URL`` (``/v1/completions``; ``model=`` names the served model) or
    ``openai-chat:URL`` (``/v1/chat/completions``); a proof memory (``knn:DIR``, ``knn-online:DIR``), the
    automation menu (``auto``, ``auto:lia,easy``), or several of these joined by ``+`` in any order
    (:func:`proofrl.policy.sources.spec_parts`), pooled by a :class:`~proofrl.policy.sources.MixedPolicy`. ``kw``
    go to the model sources' classes (``temperature``, ``max_tokens``, ``seed``, ``api_key``, ...). A bad part is
    one :class:`~proofrl.errors.ConfigError` line naming it, raised before any source is built."""
    parts = spec_parts(spec)
    for kind, where in parts:
        if kind in ("openai", "openai-chat") and not model:
            raise ConfigError(
                f"{kind}:{where}: an OpenAI-compatible endpoint needs the served model's name (model=...)"
            )
    for kind, where in parts:
        if kind == "vllm" and taught_shape(where) is not None:
            raise ConfigError(f"vllm:{where} was taught with retrieved context, which only hf:{where} is given")
    sources = [_source(kind, where, model, dict(kw)) for kind, where in parts]
    _give_context(parts, sources, spec)
    return sources[0] if len(sources) == 1 else MixedPolicy(sources)


def _give_context(parts: Sequence[tuple[str, str]], sources: Sequence[Any], spec: str) -> None:
    """Hand each model taught with retrieved context (its folder says so) the spec's proof memory (its k-NN
    source's)."""
    from .memory import KNNPolicy

    memories = [s.memory for s in sources if isinstance(s, KNNPolicy)]
    for (kind, where), s in zip(parts, sources, strict=True):
        if kind == "hf" and (shape := taught_shape(where)) is not None:
            if not memories:
                raise ConfigError(
                    f"{spec}: the model was taught with retrieved tactics in its prompt; add the memory they come "
                    "from to the spec (knn:DIR+hf:MODEL)"
                )
            s.retriever = Retriever(memories[0], None, shape)


def _source(kind: str, where: str, model: str | None, kw: dict[str, Any]) -> Any:
    """One part of a spec, built (``model``: the served model's name, for an endpoint)."""
    if kind in ("knn", "knn-online"):
        from .memory import knn_policy

        return knn_policy(where, online=kind == "knn-online")
    if kind == "auto":
        return automation_menu(tuple(t for t in where.split(",") if t)) if where else automation_menu()
    if kind == "hf":
        from .model import load_policy

        device = kw.pop("device", None)
        m, tok = load_policy(where, device=device)
        return HFTacticPolicy(m, tok, **kw)
    if kind == "vllm":
        return VLLMTacticPolicy(where, **kw)
    return OpenAITacticPolicy(where, str(model), chat=kind == "openai-chat", **kw)


# -- values ------------------------------------------------------------------------------------------------


@runtime_checkable
class ValueFn(Protocol):
    """``value(state_text)``: higher is better, about −(tactic steps still needed); a solved state is 0
    (the search sets that itself, without asking)."""

    name: str

    def value(self, state_text: str) -> float: ...


class NoValue:
    """No value model: every open state is worth ``constant`` (default −1.0, "at least one more step").

    Why −1 and not 0.5: values here are reap's / AlphaProof's −(steps to go), and a solved state is 0. A
    constant below 0 keeps every open state worse than a solved one; being equal for all open states, it
    leaves the search to priors and visit counts (and to the −cost of each edge on backup)."""

    name = "none"

    def __init__(self, constant: float = -1.0):
        self.constant = float(constant)

    def value(self, state_text: str) -> float:
        return self.constant


class EndpointValue:
    """reap's value service: ``POST url`` with JSON ``{"state": state_text}`` (plus ``extra_body``), the reply
    ``{"score": x}``. reap reads the score as steps to go and uses −score; so do we (``negate=False`` takes
    the score as the value). Failure raises :class:`PolicyEndpointError`."""

    def __init__(
        self,
        url: str,
        *,
        negate: bool = True,
        timeout: float = 60.0,
        api_key: str | None = None,
        extra_body: dict[str, Any] | None = None,
    ):
        self.url, self.negate, self.extra_body = url, negate, dict(extra_body or {})
        self.name = f"endpoint:{url}"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout, headers=headers)

    def close(self) -> None:
        self._client.close()

    def value(self, state_text: str) -> float:
        try:
            r = self._client.post(self.url, json={"state": state_text, **self.extra_body})
        except httpx.HTTPError as e:
            raise PolicyEndpointError(f"value endpoint {self.url} is unreachable or died: {e!r}") from e
        if r.status_code != 200:
            raise PolicyEndpointError(
                f"value endpoint {self.url} refused the request", status=r.status_code, body=r.text
            )
        try:
            score = float(r.json()["score"])
        except (ValueError, KeyError, TypeError) as e:
            raise PolicyEndpointError(
                f'malformed value reply from {self.url} (want {{"score": x}}): {e!r}', body=r.text
            ) from e
        if math.isnan(score):
            raise PolicyEndpointError(f"value endpoint {self.url} answered NaN", body=r.text)
        return -score if self.negate else score


class ModelHeadValue:
    """The hook for a learned value head (the expert-iteration issue builds the head): ``head(state_text)``
    returns the value in this module's convention. Nothing here trains or loads a head."""

    name = "model-head"

    def __init__(self, head: Callable[[str], float] | None = None):
        self.head = head

    def value(self, state_text: str) -> float:
        if self.head is None:
            raise NotImplementedError(
                "no value head is attached yet: the expert-iteration issue provides it; use NoValue or EndpointValue"
            )
        return float(self.head(state_text))


VALUE_KINDS: dict[str, str] = {
    "model": "proofrl.policy.value_head:value_fn_from_dir",
    "eva": "proofrl.rewards.eva:value_fn_from_dir",
}
"""``PREFIX:ARG`` value specs other than ``none`` and ``endpoint:URL``: the ``module:function`` building the
value function from ``ARG`` (imported only when named): ``model:DIR`` a policy+value model's value head (the
expert-iteration issue), ``eva:DIR`` the EVA reward model's score."""


def make_value_fn(spec: str | None = None, **kw: Any) -> ValueFn:
    """``None``/``"none"`` → :class:`NoValue`; ``"endpoint:URL"`` or a bare ``http(s)://`` URL →
    :class:`EndpointValue`; ``"model:DIR"`` / ``"eva:DIR"`` → the entry of :data:`VALUE_KINDS`."""
    if spec in (None, "", "none"):
        return NoValue(**kw)
    if spec.startswith("endpoint:"):
        return EndpointValue(spec[len("endpoint:") :], **kw)
    if spec.startswith(("http://", "https://")):
        return EndpointValue(spec, **kw)
    kind, sep, arg = spec.partition(":")
    if sep and kind in VALUE_KINDS:
        from ..registry import load_target

        return load_target(VALUE_KINDS[kind])(arg, **kw)
    raise ConfigError(
        f"unknown value function {spec!r}; use none, endpoint:URL, an http(s):// URL, "
        f"{', '.join(k + ':DIR' for k in VALUE_KINDS)}"
    )


# -- the tiny tactic model ---------------------------------------------------------------------------------


def tactic_pairs(
    transitions: Sequence[dict[str, Any]],
    *,
    include_structural: bool = False,
    max_state_chars: int | None = 2000,
    max_tactic_chars: int | None = 300,
    retriever: Retriever | None = None,
) -> list[tuple[str, str]]:
    """(prompt, tactic) pairs of transition records: bullets and braces left out unless
    ``include_structural``; states or tactics longer than the limits left out (a tiny model's 1024
    positions); a (state, tactic) pair that occurs twice is kept twice (it is twice as common). With a
    ``retriever`` each prompt holds the state's retrieved context, the transition's own theorem hidden from it."""
    out = []
    for t in transitions:
        if t.get("structural") and not include_structural:
            continue
        state, tac = t["state_before"], t["tactic"].strip()
        if (
            not tac
            or (max_state_chars is not None and len(state) > max_state_chars)
            or (max_tactic_chars is not None and len(tac) > max_tactic_chars)
        ):
            continue
        context = None
        if retriever is not None:
            module, name = t.get("module", ""), t.get("theorem", "")
            context = retriever.context(state, exclude=f"{module}.{name}" if module else name)
        out.append((tactic_prompt(state, context), tac))
    return out


def train_tiny_tactic_model(
    transitions: Sequence[dict[str, Any]],
    out_dir: str | Path,
    *,
    epochs: int = 8,
    seed: int = 0,
    lr: float = 1e-3,
    batch: int = 32,
    include_structural: bool = False,
    max_state_chars: int | None = 2000,
    max_tactic_chars: int | None = 300,
    model: dict[str, int] | None = None,
    on_epoch: Callable[[int, float], None] | None = None,
    group_by_length: bool = False,
    on_batch: Callable[[int], None] | None = None,
    retriever: Retriever | None = None,
) -> Path:
    """Build the tiny Llama (:func:`~proofrl.policy.tiny.build_tiny_model`, tokenizer trained on the pairs'
    text) and teach it state → tactic with the one SFT implementation
    (:func:`~proofrl.policy.sft.supervised_finetune`); saves model and tokenizer into ``out_dir`` (load it
    with ``make_tactic_policy("hf:" + out_dir)``). Pass only training-split transitions. ``model`` overrides
    the tiny model's shape (``hidden``, ``layers``, ``heads``, ``vocab_size``); the per-epoch losses are
    written to ``out_dir/sft_losses.json``. ``group_by_length`` batches pairs of similar length (a state's
    length varies tenfold, and padding every batch to its longest pair cost half of an epoch on a CPU; the
    demo's assets use it); ``on_batch(n)`` / ``on_epoch(epoch, loss)`` report progress. ``retriever``: teach with
    each state's retrieved context in the prompt (:mod:`proofrl.policy.retrieval`; the folder records its
    shape, so a search hands the model its memory)."""
    import json

    from .model import load_policy
    from .sft import supervised_finetune
    from .tiny import build_tiny_model

    pairs = tactic_pairs(
        transitions,
        include_structural=include_structural,
        max_state_chars=max_state_chars,
        max_tactic_chars=max_tactic_chars,
        retriever=retriever,
    )
    if not pairs:
        raise ValueError("no transitions to teach: every one was structural or over the length limits")
    out_dir = Path(out_dir)
    shape = {"hidden": 128, "layers": 2, "heads": 4, "vocab_size": 1024, **(model or {})}
    build_tiny_model(out_dir, [p + t for p, t in pairs], seed=seed, **shape)
    m, tok = load_policy(out_dir, device="cpu")
    losses = supervised_finetune(
        m,
        tok,
        pairs,
        epochs=epochs,
        lr=lr,
        batch=batch,
        seed=seed,
        on_epoch=on_epoch,
        group_by_length=group_by_length,
        on_batch=on_batch,
    )
    m.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    (out_dir / CONTEXT_FILE).unlink(missing_ok=True)
    if retriever is not None:
        save_shape(out_dir, retriever.shape)
    (out_dir / "sft_losses.json").write_text(json.dumps({"pairs": len(pairs), "epochs": epochs, "losses": losses}))
    return out_dir
