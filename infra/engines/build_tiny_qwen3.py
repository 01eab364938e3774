"""Builds the tiny Qwen3 of the real CPU stack, locally, with no model hub.

A random-init Qwen3ForCausalLM (transformers, float32) and a byte-level BPE
tokenizer trained with `tokenizers` on a synthetic corpus made here, with a
ChatML chat template. SkyRL's Tinker server trains it (JAX) and vLLM serves
it (CPU), both from the same directory. It knows nothing: what it learns in
a Harness-S run it learns from reward alone.

Deterministic: the same script gives the same tokenizer and weights.
Usage: python build_tiny_qwen3.py OUT_DIR
"""

import json
import random
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

VOCAB_SIZE = 512
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Large enough initial weights that LoRA can move the output distribution
# far within a few steps (at 0.02 the logits span a fraction of a nat).
INITIALIZER_RANGE = 0.1

WORDS = (
    "the of and to in is you that it he was for on are as with his they at be this have from or one had by word "
    "but not what all were we when your can said there use an each which she do how their if will up other about "
    "out many then them these so some her would make like him into time has look two more write go see number no "
    "way could people my than first water been call who oil its now find long down day did get come made may part"
).split()


def corpus(rng: random.Random) -> list[str]:
    lines = []
    for _ in range(3000):
        r = rng.random()
        if r < 0.4:
            lines.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))))
        elif r < 0.7:
            lines.append(" ".join(str(rng.randint(0, 10 ** rng.randint(1, 6))) for _ in range(rng.randint(2, 8))))
        else:
            words = (rng.choice(WORDS).upper() if rng.random() < 0.5 else rng.choice(WORDS).capitalize() for _ in range(rng.randint(2, 8)))
            lines.append(" ".join(words) + rng.choice([".", "!", "?", ":", ";", ","]))
    return lines


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator(corpus(random.Random(0)), trainer)
    tokenizer.save(str(out / "tokenizer.json"))
    eos = tokenizer.token_to_id("<|im_end|>")
    pad = tokenizer.token_to_id("<|endoftext|>")
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "unk_token": None, "model_max_length": 4096, "chat_template": CHAT_TEMPLATE, "clean_up_tokenization_spaces": False,
    }, indent=1))
    (out / "special_tokens_map.json").write_text(json.dumps({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}))

    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=tokenizer.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=4096,
        tie_word_embeddings=True, initializer_range=INITIALIZER_RANGE, torch_dtype="float32",
        bos_token_id=None, eos_token_id=eos, pad_token_id=pad,
    )
    model = Qwen3ForCausalLM(config)
    model.save_pretrained(out, safe_serialization=True)
    (out / "generation_config.json").write_text(json.dumps({"eos_token_id": eos, "pad_token_id": pad}))
    (out / "HARNESS_S_MODEL.md").write_text(
        "A tiny Qwen3 with random weights, built locally by Harness-S (infra/engines/build_tiny_qwen3.py) for the real CPU stack.\n"
        f"{sum(p.numel() for p in model.parameters())} parameters, vocabulary {tokenizer.get_vocab_size()} (byte-level BPE), ChatML chat template.\n"
    )
    print(json.dumps({"dir": str(out), "parameters": sum(p.numel() for p in model.parameters()), "vocab": tokenizer.get_vocab_size()}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
