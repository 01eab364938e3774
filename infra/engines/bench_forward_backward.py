"""Times SkyRL's forward_backward on a Tinker server, through the official tinker SDK.

A LoRA training client (rank 8) on the server's base model; for each batch shape
(sequences x tokens, random token ids, cross-entropy), one warm-up call (JAX
compiles each new shape) and then REPEATS timed calls; one optim_step timed
after each. Prints one line per shape: the median and spread in seconds and the
tokens per second of the median.

Usage (with the SkyRL venv's python, the server up):
  python infra/engines/bench_forward_backward.py BASE_URL BASE_MODEL [REPEATS] [SHAPE ...]
SHAPE: SEQUENCESxTOKENS (default 8x128 32x128).
"""

import random
import statistics
import sys
import time

import tinker
from tinker import types


def datum(tokens: list[int]) -> types.Datum:
    n = len(tokens) - 1
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": types.TensorData(data=tokens[1:], dtype="int64", shape=[n]),
            "weights": types.TensorData(data=[1.0] * n, dtype="float32", shape=[n]),
        },
    )


def main() -> None:
    base_url, base_model = sys.argv[1], sys.argv[2]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    shapes = [tuple(int(x) for x in s.split("x")) for s in (sys.argv[4:] or ["8x128", "32x128"])]
    rng = random.Random(0)
    service = tinker.ServiceClient(base_url=base_url, api_key="tml-harness-s-bench")
    training = service.create_lora_training_client(base_model=base_model, rank=8)
    for sequences, length in shapes:
        batch = [datum([rng.randrange(100, 40000) for _ in range(length + 1)]) for _ in range(sequences)]
        training.forward_backward(batch, "cross_entropy").result()
        training.optim_step(types.AdamParams(learning_rate=1e-5)).result()
        fb, opt = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            training.forward_backward(batch, "cross_entropy").result()
            fb.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            training.optim_step(types.AdamParams(learning_rate=1e-5)).result()
            opt.append(time.perf_counter() - t0)
        median = statistics.median(fb)
        print(
            f"{sequences}x{length}: forward_backward median {median:.1f} s (min {min(fb):.1f}, max {max(fb):.1f}; "
            f"{sequences * length / median:.0f} tokens/s), optim_step median {statistics.median(opt):.2f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
