"""Drives a Tinker API server with the official tinker SDK, as a user would.

Used by the integration tests to check that the sim cluster's trainer speaks
the protocol of the SDK version SkyRL pins (create_model, forward_backward
with importance_sampling, optim_step, save_weights_for_sampler, sampling,
and the training state: save_state, then a new training client from it with
its optimizer state, which the SDK builds with weights_info, create_model and
load_weights).

Usage: python tinker_sdk_check.py BASE_URL BASE_MODEL JSON
JSON: {"prompt": [token ids], "completion": [token ids], "logprobs": [floats]}
Prints one JSON object with what each call returned.
"""

import json
import sys

import tinker
from tinker import types


def main() -> None:
    base_url, base_model, spec = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    prompt, completion, sampled = spec["prompt"], spec["completion"], spec["logprobs"]
    tokens = prompt + completion
    n = len(tokens) - 1
    # Advantage +1 on the behaviour token (the completion's second token), 0 elsewhere.
    behaviour = len(prompt)
    logprobs = [0.0] * (len(prompt) - 1) + sampled
    advantages = [1.0 if j + 1 == behaviour + 1 else 0.0 for j in range(n)]
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": types.TensorData(data=tokens[1:], dtype="int64", shape=[n]),
            "logprobs": types.TensorData(data=logprobs, dtype="float32", shape=[n]),
            "advantages": types.TensorData(data=advantages, dtype="float32", shape=[n]),
        },
    )

    service = tinker.ServiceClient(base_url=base_url, api_key="tml-harness-s-test")
    capabilities = service.get_server_capabilities()
    training = service.create_lora_training_client(base_model=base_model, rank=8)
    fwd_bwd = training.forward_backward([datum], "importance_sampling").result()
    optim = training.optim_step(types.AdamParams(learning_rate=0.1)).result()
    saved = training.save_weights_for_sampler(name="sdk-step-1").result()
    state = training.save_state(name="sdk-state-1").result()
    restored = service.create_training_client_from_state_with_optimizer(state.path)
    forward_original = training.forward([datum], "cross_entropy").result()
    forward_restored = restored.forward([datum], "cross_entropy").result()
    sampling = service.create_sampling_client(model_path=saved.path)
    sample = sampling.sample(
        prompt=types.ModelInput.from_ints(prompt),
        num_samples=2,
        sampling_params=types.SamplingParams(max_tokens=8, temperature=1.0, seed=5),
    ).result()

    print(json.dumps({
        "sdk_version": tinker.__version__,
        "supported_models": [m.model_name for m in capabilities.supported_models],
        "model_id": training.model_id,
        "forward_backward": {
            "loss_fn_output_type": fwd_bwd.loss_fn_output_type,
            "metrics": fwd_bwd.metrics,
            "logprobs": [list(o["logprobs"].data) for o in fwd_bwd.loss_fn_outputs],
        },
        "optim_step": optim.metrics,
        "saved_path": saved.path,
        "state_path": state.path,
        "restored_model_id": restored.model_id,
        "forward_original": [list(o["logprobs"].data) for o in forward_original.loss_fn_outputs],
        "forward_restored": [list(o["logprobs"].data) for o in forward_restored.loss_fn_outputs],
        "samples": [{"tokens": list(s.tokens), "logprobs": list(s.logprobs or [])} for s in sample.sequences],
    }))


if __name__ == "__main__":
    main()
