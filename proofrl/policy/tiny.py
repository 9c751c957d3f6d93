"""A tiny Llama and its tokenizer, built on this machine from text we have, for CPU runs and tests.

No hub access: the byte-level BPE tokenizer is trained here with the ``tokenizers`` library on the corpus
given (Coq statements and proofs, prompt text), and the model is a freshly initialised ``LlamaForCausalLM``,
so its module names (``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``, ``gate_proj``, …) are the ones LoRA
targets in Qwen and DeepSeek models. Both are written with ``save_pretrained`` and load back through
:func:`proofrl.policy.model.load_policy` like any checkpoint.

Run: ``python -c "from proofrl.policy.tiny import build_tiny_model; build_tiny_model(Path('tiny'), texts)"``.
The same seed and corpus give byte-identical files.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

BOS, EOS, PAD = "<s>", "</s>", "<pad>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (PAD, BOS, EOS, IM_START, IM_END)  # ids 0..4, in this order

# ChatML, the format Qwen-based provers (Kimina) use; prompts.py renders the same text without a tokenizer.
CHAT_TEMPLATE = (
    "{% for m in messages %}" + IM_START + "{{ m['role'] }}\n{{ m['content'] }}" + IM_END + "\n{% endfor %}"
    "{% if add_generation_prompt %}" + IM_START + "assistant\n{% endif %}"
)


def train_tokenizer(corpus: Iterable[str], vocab_size: int, max_positions: int) -> PreTrainedTokenizerFast:
    """A byte-level BPE (GPT-2 style: every byte is a token, so nothing is ever unknown) that adds ``<s>``."""
    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size {vocab_size} < {256 + len(SPECIAL_TOKENS)} (256 bytes + special tokens)")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = [t for t in corpus if t]
    if not texts:
        raise ValueError("the corpus is empty: the tokenizer needs some text to learn merges from")
    tok.train_from_iterator(texts, trainer)
    bos_id = tok.token_to_id(BOS)
    # Llama/DeepSeek tokenizers prepend BOS; ours does too so prompt handling is exercised the same way.
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD, model_max_length=max_positions
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_config(
    vocab_size: int,
    *,
    hidden: int = 128,
    layers: int = 2,
    heads: int = 4,
    max_positions: int = 1024,
    ids: tuple[int, int, int] = (1, 2, 0),
) -> LlamaConfig:
    """The tiny Llama's shape: ``layers`` blocks of width ``hidden`` (MLP 4×), ``heads`` heads, embeddings tied;
    ``ids``: the BOS, EOS and PAD token ids (:data:`SPECIAL_TOKENS`' order puts PAD at 0, BOS 1, EOS 2)."""
    bos, eos, pad = ids
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,  # halves the parameters at this size
        bos_token_id=bos,
        eos_token_id=eos,
        pad_token_id=pad,
    )


def build_tiny_model(
    out_dir: Path,
    corpus: Iterable[str],
    *,
    vocab_size: int = 1024,
    hidden: int = 128,
    layers: int = 2,
    heads: int = 4,
    max_positions: int = 1024,
    seed: int = 0,
) -> Path:
    """Train the tokenizer on ``corpus``, initialise a tiny Llama, save both into ``out_dir``; returns it.

    Defaults give about 0.5 M parameters (embeddings tied), small enough to sample and train on 2 CPU cores.
    The global torch RNG is left as it was.
    """
    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(corpus, vocab_size, max_positions)
    ids: dict[str, int] = {}
    for t in SPECIAL_TOKENS:
        i = tokenizer.convert_tokens_to_ids(t)
        assert isinstance(i, int)  # one token in, one id out
        ids[t] = i
    config = tiny_config(
        len(tokenizer),  # a small corpus can stop BPE short of vocab_size
        hidden=hidden,
        layers=layers,
        heads=heads,
        max_positions=max_positions,
        ids=(ids[BOS], ids[EOS], ids[PAD]),
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    # A chat turn ends with <|im_end|>, a plain completion with </s>: either ends generation.
    model.generation_config = GenerationConfig(
        bos_token_id=ids[BOS], eos_token_id=[ids[EOS], ids[IM_END]], pad_token_id=ids[PAD]
    )
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def sample_corpus() -> list[str]:
    """Text to train a tokenizer on when nothing better is at hand: the bundled Coq sample (headers,
    statements, proofs) and every prompt format rendered on it."""
    import json
    from importlib.resources import files

    from ..problems import Problem
    from .prompts import FORMATS

    rows = [
        json.loads(line)
        for line in files("proofrl.data").joinpath("bundled/coq_sample.jsonl").read_text().splitlines()
        if line.strip()
    ]
    problems = [Problem(r["name"], r["formal_statement"], r.get("header", ""), proof=r.get("proof", "")) for r in rows]
    texts = [p.header + p.formal_statement + "\n" + p.proof for p in problems]
    for f in FORMATS.values():
        if f.backend in {p.backend for p in problems}:
            texts += [f.prompt(p) + f.completion(p, p.proof) for p in problems if p.proof]
    return texts
