#!/usr/bin/python3
# count_parameters.py: checks that a captured graph file counts the parameters PyTorch counts for
# the model file it came from: model() built for real on the CPU (the corpus models are small;
# the real training run builds them too), its distinct parameters summed, against the
# `# parameters: N` header the capture writes.
#   count_parameters.py MODEL.py GRAPH.yaml        exit 0 when equal, 1 when not
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "capture"))


def main(model_path, graph_path):
    import runner
    user = runner.load_model_file(model_path)
    model = user.model()
    pytorch = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    with open(graph_path) as f:
        header = re.search(r"^# parameters: (\d+)", f.read(), re.M)
    captured = int(header.group(1)) if header else None
    if captured != pytorch:
        print(f"FAIL: {os.path.basename(model_path)}: the capture counts {captured} parameters, PyTorch {pytorch}")
        return 1
    print(f"parameters: {pytorch} (the capture and PyTorch agree)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
