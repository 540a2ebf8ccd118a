#!/usr/bin/python3
# gpu_harness.py: runs a scenario's training loop for real on a CUDA GPU with the model code of
# validate/models.py (the loop of validate/capture.py, moved to the GPU) and measures it per
# phase: memory_allocated / memory_reserved at every phase mark, the phase peaks
# (max_memory_allocated / max_memory_reserved, reset at every mark), memory_stats() at the end,
# and the device's used memory (NVML for this process when pynvml is importable, else
# cudaMemGetInfo). It records torch.cuda.memory._record_memory_history and saves the snapshot,
# runs `oomcast replay` on it (which must reproduce its segment decisions exactly), runs
# `oomcast plan --json` on the scenario moved to the GPU's device profile, and prints and
# writes predicted against measured.
#
#   python3 validate/gpu_harness.py SCENARIO.yaml --out DIR [--set key=value ...]
#   /usr/bin/python3 validate/gpu_harness.py SCENARIO.yaml --out DIR --dry-run   # no CUDA
#
# --dry-run runs the same loop on the CPU and exercises everything but the CUDA calls: the
# scenario is read, the model trained, the phase marks taken, `oomcast plan` run for the GPU
# profile, a committed snapshot (tests/data/) replayed, and the CSV written with empty
# measured columns. Single process only: torchrun (DDP, FSDP) is future work (README.md).
import argparse
import contextlib
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
# CSV_COLUMNS, plan_overrides and oomcast_plan are also read through this module by check_gpu_results.py.
from gpu_harness_io import (CSV_COLUMNS, mib, oomcast_plan, oomcast_replay, plan_overrides, print_table,  # noqa: E402,F401
                            rows_for_csv, write_csv)


# torch.cuda.get_device_name() fragments -> oomcast device profiles (scenario/device_profiles.cc).
GPU_PROFILES = [
    ("H200", "h200"), ("H100", "h100-80gb"), ("A100-SXM4-40GB", "a100-40gb"), ("A100-PCIE-40GB", "a100-40gb"),
    ("A100", "a100-80gb"), ("L4", "l4"), ("T4", "t4"), ("V100-SXM2-16GB", "v100-16gb"), ("V100", "v100-32gb"),
    ("RTX 3090", "rtx-3090"), ("RTX 4090", "rtx-4090"), ("A10G", "a10g"),
]

SAMPLE_SNAPSHOT = os.path.join(REPO, "tests", "data", "hfblog_linear_10k_50k_grad.pickle.gz")


def profile_for(gpu_name):
    for fragment, profile in GPU_PROFILES:
        if fragment in gpu_name:
            return profile
    return None


def torch_release(version):
    """'2.11.0+cu130' -> '2.11'."""
    parts = version.split("+")[0].split(".")
    return f"{parts[0]}.{parts[1]}"


# ---------------------------------------------------------------- measuring

class CudaMeter:
    """Reads the caching allocator's figures and the device's used memory for this process."""

    def __init__(self, torch):
        self.torch = torch
        self.nvml = None
        self.nvml_handle = None
        try:
            import pynvml  # nvidia-ml-py
            pynvml.nvmlInit()
            self.nvml = pynvml
            self.nvml_handle = pynvml.nvmlDeviceGetHandleByIndex(self._nvml_index())
        except Exception:  # no pynvml, no NVML, or a sandbox without it: fall back to mem_get_info
            self.nvml = None
        self.used_before_context = self._nvml_device_used()

    def _nvml_index(self):
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        first = visible.split(",")[0].strip() if visible else "0"
        return int(first) if first.isdigit() else 0

    def _nvml_device_used(self):
        if not self.nvml:
            return None
        try:
            return int(self.nvml.nvmlDeviceGetMemoryInfo(self.nvml_handle).used)
        except Exception:
            return None

    def process_used(self):
        """(bytes, method): this process's GPU memory as nvidia-smi lists it, else total - free."""
        if self.nvml:
            try:
                pid = os.getpid()
                for proc in self.nvml.nvmlDeviceGetComputeRunningProcesses(self.nvml_handle):
                    if proc.pid == pid and proc.usedGpuMemory is not None:
                        return int(proc.usedGpuMemory), "nvml_process"
            except Exception:
                pass
        free, total = self.torch.cuda.mem_get_info()
        return int(total - free), "mem_get_info_used"

    def allocated(self):
        return int(self.torch.cuda.memory_allocated())

    def reserved(self):
        return int(self.torch.cuda.memory_reserved())

    def phase_peaks(self):
        return int(self.torch.cuda.max_memory_allocated()), int(self.torch.cuda.max_memory_reserved())

    def reset_peaks(self):
        self.torch.cuda.synchronize()
        self.torch.cuda.reset_peak_memory_stats()

    def sync(self):
        self.torch.cuda.synchronize()

    def stats(self):
        return {k: int(v) for k, v in self.torch.cuda.memory_stats().items() if isinstance(v, (int, float))}


class DryMeter:
    """The CPU dry run's meter: the same calls, nothing measured (None everywhere)."""

    used_before_context = None

    def process_used(self):
        return None, "dry_run"

    def allocated(self):
        return None

    def reserved(self):
        return None

    def phase_peaks(self):
        return None, None

    def reset_peaks(self):
        pass

    def sync(self):
        pass

    def stats(self):
        return {}


class Phases:
    """Takes the measurements at every phase mark: the figures at the mark, and the peaks of the
    phase the mark closes (the allocator's peak counters are reset at every mark)."""

    def __init__(self, meter):
        self.meter = meter
        self.rows = []  # dicts: phase, allocated, reserved, device_used at the mark; peaks of the phase

    def mark(self, label):
        self.meter.sync()
        self._close()
        used, method = self.meter.process_used()
        self.rows.append(dict(phase=label, allocated=self.meter.allocated(), reserved=self.meter.reserved(),
                              device_used=used, device_method=method, peak_allocated=None, peak_reserved=None))
        self.meter.reset_peaks()

    def _close(self):
        if not self.rows:
            return
        peak_allocated, peak_reserved = self.meter.phase_peaks()
        row = self.rows[-1]
        row["peak_allocated"], row["peak_reserved"] = peak_allocated, peak_reserved

    def finish(self):
        self.meter.sync()
        self._close()


# ---------------------------------------------------------------- memory history

def start_history(torch, max_entries):
    """Starts torch.cuda.memory._record_memory_history with the signature this release has;
    returns False when the release has none (before 2.0)."""
    record = getattr(getattr(torch.cuda, "memory", None), "_record_memory_history", None)
    if record is None:
        return False
    try:  # 2.1+: enabled="all", context=None skips stack traces (small snapshots)
        record(enabled="all", context=None, max_entries=max_entries)
        return True
    except TypeError:
        pass
    try:  # 2.0: record(True, trace_alloc_max_entries=..., trace_alloc_record_context=...)
        record(True, trace_alloc_max_entries=max_entries, trace_alloc_record_context=False)
        return True
    except TypeError:
        return False


def save_history(torch, path):
    """Writes the snapshot (gzip-compressed pickle) and stops recording."""
    snapshot = torch.cuda.memory._snapshot()
    import pickle
    with gzip.open(path, "wb", compresslevel=6) as f:
        pickle.dump(snapshot, f)
    try:
        torch.cuda.memory._record_memory_history(enabled=None)
    except TypeError:
        torch.cuda.memory._record_memory_history(False)


# ---------------------------------------------------------------- the training loop

def make_optimizer(torch, params, cfg, on_gpu):
    kind = str(cfg.get("type", "adamw")).lower()
    impl = str(cfg.get("impl", "single_tensor")).lower()
    if impl == "fused" and not on_gpu:
        raise ValueError("optimizer impl 'fused' runs only on CUDA (not in a dry run)")
    flags = {"foreach": impl == "foreach"}
    if impl == "fused":
        flags = {"fused": True}
    lr = float(cfg.get("lr", 1e-3))
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=float(cfg.get("momentum", 0.0)),
                               weight_decay=float(cfg.get("weight_decay", 0.0)), **flags)
    cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}.get(kind)
    if cls is None:
        raise ValueError(f"optimizer {kind!r}: the harness supports sgd, adam and adamw")
    wd = float(cfg.get("weight_decay", 0.01 if kind == "adamw" else 0.0))
    return cls(params, lr=lr, betas=tuple(cfg.get("betas", (0.9, 0.999))), weight_decay=wd,
               amsgrad=bool(cfg.get("amsgrad", False)), **flags)


def run_loop(cfg, torch, phases, device, log):
    """capture.py's loop with the tensors on `device`; phase marks go to `phases`."""
    import capture
    import models

    seed = int(cfg.get("seed", 0))
    torch.manual_seed(seed)
    random.seed(seed)
    name, family, dims, options = capture.resolve_model(cfg["model"], cfg["_dir"])
    batch, accum = int(cfg.get("batch_size", 1)), int(cfg.get("grad_accum_steps", 1))
    seq = int(cfg.get("seq_len") or cfg.get("image_size") or 0)
    iters = int(cfg.get("iterations", 3))
    precision = capture._mode(cfg.get("precision"), "fp32")
    ckpt = capture._mode(cfg.get("checkpointing"), "none")
    if ckpt not in ("none", "full"):
        raise ValueError(f"checkpointing {ckpt!r}: the harness supports none and full")
    # Unset attention: what the planner assumes (F.scaled_dot_product_attention choosing its
    # kernel) where torch has SDPA on CUDA, else the eager attention models.py writes out.
    has_sdpa = hasattr(torch.nn.functional, "scaled_dot_product_attention")
    attention = str(cfg.get("attention") or ("auto" if has_sdpa and device.startswith("cuda") else "eager"))
    sdpa_backend = sdpa_context(torch, attention, device)
    (set_to_none, zero_first, held, keep_losses,
     eval_on, eval_batches, eval_no_grad, eval_keep) = capture.loop_settings(cfg)
    device_type = "cuda" if device.startswith("cuda") else "cpu"
    if precision in ("amp_bf16", "amp_fp16"):
        if precision == "amp_fp16" and device_type == "cpu":
            raise ValueError("precision amp_fp16 has no CPU autocast in torch 1.13 (not in a dry run)")
        dtype = torch.bfloat16 if precision == "amp_bf16" else torch.float16
        autocast = lambda: torch.autocast(device_type, dtype=dtype)  # noqa: E731
    elif precision in ("fp32", "pure_bf16"):
        autocast = contextlib.nullcontext
    else:
        raise ValueError(f"precision {precision!r}: the harness supports fp32, amp_bf16, amp_fp16, pure_bf16")
    scaler = None
    if precision == "amp_fp16":
        scaler = torch.amp.GradScaler("cuda") if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler") \
            else torch.cuda.amp.GradScaler()
    gen = torch.Generator().manual_seed(seed + 1)

    def batch_on_device():
        # The batch is made on the CPU (the seeded generator is a CPU one) and copied over:
        # on the GPU only the copies exist, as with a DataLoader's pinned batches.
        return tuple(t.to(device) for t in models.make_batch(family, dims, batch, seq, gen, options=options))

    phases.mark("setup")
    model = models.build_model(family, dims, options, dropout=capture._dropout(cfg.get("dropout", 0.0)),
                               attention=attention, checkpointing=(ckpt == "full"), device=device)
    if precision == "pure_bf16":
        model = model.to(torch.bfloat16)
    model.train()
    opt_cfg = cfg.get("optimizer") or {}
    opt = make_optimizer(torch, model.parameters(), {"type": opt_cfg} if isinstance(opt_cfg, str) else opt_cfg,
                         device_type == "cuda")
    nparams = sum(p.numel() for p in model.parameters())
    losses, eval_losses = [], []

    def evaluate():
        model.eval()
        with (torch.no_grad() if eval_no_grad else contextlib.nullcontext()):
            for _ in range(eval_batches):
                ex, ey = batch_on_device()
                with autocast():
                    if "logits" in held:
                        elogits, el = model(ex, ey)  # noqa: F841 (lives until rebound)
                    else:
                        el = model(ex, ey)[1]
                eval_losses.append(el if eval_keep else el.item())
        model.train()

    logits = loss = None  # noqa: F841
    t0 = time.time()
    with sdpa_backend:
        run_iterations(locals())  # ends with the teardown mark, while its loop variables live
    phases.finish()
    log(f"model {name} ({family}): {nparams} parameters; loop {time.time() - t0:.2f}s")
    return dict(name=name, family=family, parameters=nparams)


def sdpa_context(torch, attention, device):
    """The context that makes F.scaled_dot_product_attention take the scenario's kernel."""
    if attention in ("eager", "auto"):
        return contextlib.nullcontext()
    if not hasattr(torch.nn.functional, "scaled_dot_product_attention") or not device.startswith("cuda"):
        raise ValueError(f"attention {attention!r} needs torch 2.x SDPA on CUDA (the dry run and torch 1.13 run "
                         "only 'eager')")
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # 2.3+
    except ImportError as error:
        raise ValueError(f"attention {attention!r}: this torch has no torch.nn.attention.sdpa_kernel") from error
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "mem_efficient": SDPBackend.EFFICIENT_ATTENTION,
                "sdpa_math": SDPBackend.MATH}
    if attention not in backends:
        raise ValueError(f"attention {attention!r}: the harness knows eager, flash, mem_efficient, sdpa_math")
    return sdpa_kernel(backends[attention])


def run_iterations(env):
    """The iteration loop of run_loop (its locals in `env`), kept apart so the SDPA context
    wraps it whole."""
    (iters, zero_first, phases, opt, set_to_none, accum, batch_on_device, autocast, held, model, scaler,
     keep_losses, losses, eval_on, evaluate) = (env[k] for k in (
        "iters", "zero_first", "phases", "opt", "set_to_none", "accum", "batch_on_device", "autocast", "held",
        "model", "scaler", "keep_losses", "losses", "eval_on", "evaluate"))
    logits = loss = None  # noqa: F841 (the loop variables, alive until rebound)
    for it in range(iters):
        if zero_first:
            phases.mark(f"iter{it}/zero_grad")
            opt.zero_grad(set_to_none=set_to_none)
        for k in range(accum):
            prefix = f"iter{it}/" if accum == 1 else f"iter{it}/mb{k}/"
            phases.mark(prefix + "forward")
            x, y = batch_on_device()
            with autocast():
                if "logits" in held:
                    logits, loss = model(x, y)
                else:
                    loss = model(x, y)[1]
            if accum > 1:
                loss = loss / accum
            phases.mark(prefix + "backward")
            (scaler.scale(loss) if scaler else loss).backward()
            losses.append(loss if keep_losses else loss.item())
            if "loss" not in held:
                loss = None
        phases.mark(f"iter{it}/optimizer")
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        if not zero_first:
            phases.mark(f"iter{it}/zero_grad")
            opt.zero_grad(set_to_none=set_to_none)
        if eval_on:
            phases.mark(f"iter{it}/eval")
            evaluate()
    phases.mark("teardown")  # after it: the loop variables die as this function returns


# ---------------------------------------------------------------- oomcast

def main(argv=None):
    ap = argparse.ArgumentParser(description="run a scenario on a CUDA GPU and compare with oomcast plan")
    ap.add_argument("scenario", help="scenario YAML (the planner's format; validate/scenarios/ or scenarios/)")
    ap.add_argument("--out", required=True, help="folder for the snapshot, the JSON record and the CSV")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a scenario key for both the run and the prediction")
    ap.add_argument("--csv", help="CSV to append the per-phase rows to (default OUT/phases.csv)")
    ap.add_argument("--oomcast", default=os.path.join(REPO, "build", "oomcast"), help="the oomcast binary")
    ap.add_argument("--device-profile", help="oomcast device profile of the GPU (default: from its name)")
    ap.add_argument("--dry-run", action="store_true", help="run on the CPU, no CUDA call (CI)")
    ap.add_argument("--snapshot-max-mib", type=float, default=8.0,
                    help="keep the gzipped snapshot only when it is at most this large")
    ap.add_argument("--history-entries", type=int, default=200000, help="memory history ring size")
    ap.add_argument("--timeout", type=int, default=120, help="seconds allowed for each oomcast call")
    args = ap.parse_args(argv)
    log = lambda s: print(s, flush=True)  # noqa: E731
    os.makedirs(args.out, exist_ok=True)
    scenario_name = os.path.splitext(os.path.basename(args.scenario))[0]

    try:
        import torch
    except ImportError:
        print("gpu_harness: this python has no torch", file=sys.stderr)
        return 77
    import capture
    cfg = capture.load_config(args.scenario, args.set)
    on_gpu = not args.dry_run
    if on_gpu and not torch.cuda.is_available():
        print("gpu_harness: no CUDA GPU is available (torch.cuda.is_available() is False); "
              "use --dry-run for the CPU path", file=sys.stderr)
        return 77
    torch_version = torch_release(torch.__version__)
    module_loading = os.environ.get("CUDA_MODULE_LOADING", "")
    if on_gpu:
        meter = CudaMeter(torch)
        torch.cuda.init()
        torch.empty(1, device="cuda")  # creates the context; one 512-byte block, one 2 MiB segment
        meter.sync()
        used, method = meter.process_used()
        context_bytes = used - meter.reserved()
        device_after = meter._nvml_device_used()
        if method != "nvml_process" and meter.used_before_context is not None and device_after is not None:
            # NVML's device counter before and after: consistent with itself, unlike
            # mem_get_info minus an NVML figure (they count driver reservations differently).
            method = "nvml_device_delta"
            context_bytes = device_after - meter.used_before_context - meter.reserved()
        elif method != "nvml_process":
            method = "mem_get_info_upper_bound"  # includes other processes and driver reservations
        # The allocator starts empty, as the prediction and a fresh process do: the probe
        # tensor's cached 2 MiB segment goes back, the peak counters start from zero.
        torch.cuda.empty_cache()
        meter.reset_peaks()
        # torch sets CUDA_MODULE_LOADING=LAZY at CUDA init when it was unset (since 1.13); it
        # does so in C, so os.environ (read at start-up) still shows it unset.
        module_loading = (os.environ.get("CUDA_MODULE_LOADING") or "lazy").lower()
        if module_loading not in ("lazy", "eager"):
            module_loading = "lazy"  # DEFAULT: lazy on CUDA 12.2+ (NVIDIA lazy loading guide)
        gpu_name = torch.cuda.get_device_name(0)
        major, minor = torch.cuda.get_device_capability(0)
        capability = f"{major}.{minor}"
        cuda_version = torch.version.cuda or ""
        try:
            driver = str(meter.nvml.nvmlSystemGetDriverVersion()) if meter.nvml else ""
        except Exception:
            driver = ""
        profile = args.device_profile or profile_for(gpu_name)
        if not profile:
            print(f"gpu_harness: no oomcast device profile for {gpu_name!r}; pass --device-profile", file=sys.stderr)
            return 2
        device = "cuda"
    else:
        meter = DryMeter()
        context_bytes, method = None, "dry_run"
        gpu_name, capability, cuda_version, driver = "dry-run-cpu", "", "", ""
        profile = args.device_profile or "h200"
        module_loading = module_loading.lower() if module_loading.lower() in ("lazy", "eager") else ""
        device = "cpu"
        torch.set_num_threads(1)
    cuda_release = ".".join(cuda_version.split(".")[:2]) if cuda_version else ""

    snapshot_path = os.path.join(args.out, scenario_name + ".pickle.gz")
    recording = on_gpu and start_history(torch, args.history_entries)
    phases = Phases(meter)
    try:
        info = run_loop(cfg, torch, phases, device, log)
    except ValueError as error:  # a scenario feature the harness cannot run (said before any work)
        print(f"gpu_harness: {scenario_name}: not runnable here: {error}", file=sys.stderr)
        return 3
    stats = meter.stats()
    if recording:
        save_history(torch, snapshot_path)

    sets = plan_overrides(args.set, profile, torch_version, cuda_release, module_loading)
    # The measurements are the product: when oomcast cannot run here (a GPU machine without its
    # libraries) they are still written, and validate/check_gpu_results.py predicts later.
    try:
        plan = oomcast_plan(args.oomcast, args.scenario, sets, args.timeout)
    except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired) as error:
        log(f"gpu_harness: no prediction ({error}); measured columns only")
        plan = {}
    # The snapshot replay check: this run's snapshot on a GPU; in a dry run a committed one, so
    # the parsing of `oomcast replay --json` is exercised too.
    replay_target = snapshot_path if recording else SAMPLE_SNAPSHOT
    try:
        reproduced, replay_text, _ = oomcast_replay(args.oomcast, replay_target, torch_version, args.timeout)
    except (OSError, ValueError, subprocess.TimeoutExpired) as error:
        reproduced, replay_text = None, f"not run ({error})"
    verdict = {True: "REPRODUCED", False: "DIVERGED", None: "NOT CHECKED"}[reproduced]
    log(f"oomcast replay {os.path.relpath(replay_target, REPO) if replay_target == SAMPLE_SNAPSHOT else replay_target}: "
        f"{replay_text} -> {verdict}")
    if recording and os.path.getsize(snapshot_path) > args.snapshot_max_mib * 2**20:
        log(f"snapshot {snapshot_path} is {os.path.getsize(snapshot_path) / 2**20:.1f} MiB: not kept")
        os.remove(snapshot_path)

    meta = dict(gpu=gpu_name, compute_capability=capability, torch_version=torch.__version__, cuda_version=cuda_version,
                driver_version=driver, module_loading=module_loading,
                scenario=os.path.relpath(os.path.abspath(args.scenario), REPO), overrides=";".join(args.set),
                device_profile=profile)
    rows = rows_for_csv(meta, phases, plan, context_bytes, method, args.dry_run)
    log(f"{scenario_name} on {gpu_name} (torch {torch.__version__}, CUDA {cuda_version or '-'}, "
        f"module loading {module_loading or '-'}): context measured {mib(context_bytes).strip()} MiB ({method}), "
        f"predicted {mib(rows[0]['predicted_context_bytes']).strip()} MiB")
    print_table(rows, log)
    write_csv(args.csv or os.path.join(args.out, "phases.csv"), rows)
    record = dict(meta, info=info, context_bytes=context_bytes, context_method=method, memory_stats=stats,
                  replay_reproduced=reproduced, replay=replay_text, plan_overrides=sets,
                  predicted_peak_allocated_bytes=plan.get("peak_allocated_bytes"),
                  predicted_peak_reserved_bytes=plan.get("peak_reserved_bytes"),
                  predicted_device_used_bytes=plan.get("predicted_device_used_bytes"),
                  context_source=(plan.get("outside_allocator") or {}).get("context_source"), phases=rows)
    with open(os.path.join(args.out, scenario_name + ".json"), "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
    if reproduced is False:
        log("gpu_harness: oomcast replay did NOT reproduce the snapshot's segment decisions")
        return 1
    if args.dry_run and (not plan or reproduced is not True):
        log("gpu_harness: the dry run must predict and replay (it tests exactly that plumbing)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
