"""check_hf_refusal.py: a config.json the capture cannot build is one line and exit 2.

    PYTHON capture/tests/check_hf_refusal.py CASE     (validate/hf_capture.cmake)

Cases: unknown_model_type (a model_type this transformers does not have, as with a transformers
too old for a newer architecture's config) and unknown_class (an `architectures` class it lacks).
Exit 77 (skip) without torch or transformers.
"""
import json
import os
import subprocess
import sys
import tempfile

CAPTURE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = {
    "unknown_model_type": ({"model_type": "llama99", "architectures": ["Llama99ForCausalLM"]},
                           "model_type 'llama99' is unknown to transformers"),
    "unknown_class": ({"model_type": "llama", "architectures": ["LlamaForTimeTravel"], "hidden_size": 64,
                       "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 128},
                      "architectures names LlamaForTimeTravel, which transformers"),
}


def main():
    case = sys.argv[1]
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as err:
        print(f"SKIP: {sys.executable} cannot import torch and transformers ({err})")
        return 77
    config, expected = CASES[case]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        out = os.path.join(tmp, "out.graph.yaml")
        run = subprocess.run([sys.executable, os.path.join(CAPTURE, "oomcast_capture.py"), path, "-o", out],
                             capture_output=True, text=True)
        wrote = os.path.exists(out)
    lines = [line for line in run.stderr.splitlines() if line.strip() and not line.startswith("[transformers]")]
    if run.returncode != 2 or len(lines) != 1 or expected not in lines[0] or wrote:
        print(f"FAIL: {case}: expected exit 2 and one line containing {expected!r}; got exit {run.returncode}, "
              f"stderr {run.stderr!r}")
        return 1
    print(f"PASS: {case}: exit 2, {lines[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
