"""The tiny model is built here, deterministically, and loads like any local checkpoint (with and without LoRA)."""

from __future__ import annotations

import time

import pytest
import torch

from proofrl.policy import LoraConfig, build_tiny_model, load_policy
from proofrl.policy.tiny import sample_corpus

CORPUS = sample_corpus()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), CORPUS, vocab_size=512, seed=3)


def test_build_is_fast_and_deterministic_for_a_seed(tmp_path, tiny):
    t0 = time.monotonic()
    again = build_tiny_model(tmp_path / "again", CORPUS, vocab_size=512, seed=3)
    assert time.monotonic() - t0 < 10
    for name in ("model.safetensors", "tokenizer.json", "config.json", "generation_config.json"):
        assert (again / name).read_bytes() == (tiny / name).read_bytes(), name
    other = build_tiny_model(tmp_path / "other", CORPUS, vocab_size=512, seed=4)
    assert (other / "model.safetensors").read_bytes() != (tiny / "model.safetensors").read_bytes()
    assert (other / "tokenizer.json").read_bytes() == (tiny / "tokenizer.json").read_bytes()  # seed is the model's


def test_build_leaves_the_global_rng_alone(tmp_path):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_tiny_model(tmp_path, CORPUS[:10], vocab_size=300)
    assert torch.equal(torch.rand(3), expected)


def test_tokenizer_round_trips_coq_text_and_adds_bos(tiny):
    model, tok = load_policy(tiny)
    text = "Theorem t : forall n : nat, n + 0 = n.\nProof.\n  intros n. lia.\nQed. ∀ é"
    ids = tok(text)["input_ids"]
    assert ids[0] == tok.bos_token_id
    assert tok.decode(ids, skip_special_tokens=True) == text  # byte-level: nothing is unknown
    assert len(ids) < len(text.encode()) / 2  # merges were learned from the corpus
    assert {tok.pad_token, tok.bos_token, tok.eos_token} == {"<pad>", "<s>", "</s>"}
    assert len(tok) <= 512 and model.config.vocab_size == len(tok)


def test_chat_template_renders_chatml(tiny):
    _, tok = load_policy(tiny)
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert im_end in load_policy(tiny)[0].generation_config.eos_token_id  # a chat turn ends generation


def test_model_is_a_tiny_llama_in_fp32_on_cpu(tiny):
    model, _ = load_policy(tiny)
    assert model.config.model_type == "llama"
    assert model.dtype == torch.float32 and model.device.type == "cpu"
    assert sum(p.numel() for p in model.parameters()) < 1_000_000
    assert not model.training
    names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    assert {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"} <= names


def test_load_policy_bf16_when_asked(tiny):
    model, _ = load_policy(tiny, dtype=torch.bfloat16)
    assert model.dtype == torch.bfloat16


def test_lora_trains_only_adapters_and_saved_adapter_reloads(tiny, tmp_path):
    model, tok = load_policy(tiny, lora=LoraConfig(r=4, alpha=8, dropout=0.0))
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert {n.split(".")[-4] for n in trainable} == {"q_proj", "k_proj", "v_proj", "o_proj"}
    ids = torch.tensor([tok("intros n. lia.")["input_ids"]])
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.add_(0.1)  # peft starts B at zero; make the adapter change the output
        logits = model(ids).logits
    model.save_pretrained(tmp_path / "adapter")
    reloaded, _ = load_policy(tmp_path / "adapter")
    with torch.no_grad():
        assert torch.allclose(reloaded(ids).logits, logits, atol=1e-5)
    assert not any(p.requires_grad for p in reloaded.parameters())  # frozen unless a LoraConfig asks to train


def test_bad_inputs_are_refused_with_a_reason(tmp_path):
    with pytest.raises(ValueError, match="empty"):
        build_tiny_model(tmp_path, [])
    with pytest.raises(ValueError, match="vocab_size"):
        build_tiny_model(tmp_path, CORPUS, vocab_size=100)
    with pytest.raises(ValueError, match="multiple of heads"):
        build_tiny_model(tmp_path, CORPUS, hidden=100, heads=3)
    with pytest.raises(FileNotFoundError, match="local paths"):
        load_policy(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=r"config\.json"):
        load_policy(tmp_path)
    with pytest.raises(ValueError, match="r must be >= 1, got 0"):
        LoraConfig(r=0)
