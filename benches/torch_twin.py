#!/usr/bin/env python3
"""PyTorch twin of steptrace's burn `mlp` and `convnet` training runs (stdlib + torch only).

Mirrors the Rust side so that step times can be compared side by side:
  data      datasets/src/{digits,fashion}.rs, dataset.rs (split), rng.rs (SplitMix64)
  batches   crates/steptrace-burn/src/data.rs (ImageBatches: 80/20 split, draws with replacement)
  models    models/src/{mlp,convnet}.rs, loss models/src/lib.rs (classification_loss)
  optimizer burn-optim 0.21 AdamConfig defaults (beta1 0.9, beta2 0.999, eps 1e-5), lr 1e-3
  step      crates/steptrace-burn/src/run.rs + step.rs: load, h2d, forward, loss, backward,
            optimizer, one sync at the step end; the profiler's step() is outside the step time.

--profile interleaved mirrors `steptrace bench --profile interleaved`: torch.profiler runs over
the measured steps under a schedule of short cycles (default wait=7,warmup=1,active=2, repeated
to the end), each step is labelled with the phase torch.profiler's own schedule gives it, and
each process reports active/wait and warmup/wait (the ratio of the phases' median step times),
so that the profiler's cost is read inside one process, as steptrace's is. A cycle's trace is
exported in prof.step(), outside the step's time (kept with --trace-dir, else written to a
temporary folder and removed), as steptrace writes its file on another thread.
"""
import time

PROCESS_START = time.perf_counter()  # before `import torch`, so run 0 can report a cold start

import argparse, contextlib, gzip, json, math, os, pathlib, platform, statistics, struct, sys, tempfile, warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerAction, ProfilerActivity, profile, schedule

DATA = pathlib.Path(__file__).resolve().parent.parent / "datasets" / "data"
MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
HELD_OUT_SALT = 0x5EED7E57  # data.rs ImageBatches::held_out
EVAL_BATCHES = 8            # run.rs EVAL_BATCHES
TEST_FRACTION = 0.2         # data.rs ImageBatches::new


class SplitMix64:
    """datasets/src/rng.rs, bit for bit, so that splits and batches pick the same samples."""

    def __init__(self, seed):
        self.state = seed & MASK

    def next_u64(self):
        self.state = (self.state + GOLDEN) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return (self.next_u64() * n) >> 64

    def shuffle(self, items):
        for i in range(len(items) - 1, 0, -1):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]


def scale(raw, divisor):
    # Rust divides in f32. Dividing in f64 and rounding once to f32 gives the same bits
    # (53 >= 2*24+2, so double rounding is innocuous); a float32 tensor division might not.
    return (raw.to(torch.float64) / divisor).to(torch.float32)


def load_digits():
    """digits.rs parse_digits_csv: headerless rows of 64 pixels (0..=16) and a label; pixels / 16."""
    with gzip.open(DATA / "digits.csv.gz", "rt") as f:
        rows = [line.strip().split(",") for line in f if line.strip()]
    assert all(len(r) == 65 for r in rows), "digits.csv.gz: expected 65 columns"
    pixels = torch.tensor([int(v) for r in rows for v in r[:64]], dtype=torch.int64)
    labels = torch.tensor([int(r[64]) for r in rows], dtype=torch.int64)
    return scale(pixels, 16.0).reshape(-1, 1, 8, 8), labels, "pixel / 16 (digits.rs, f32)"


def load_fashion():
    """fashion.rs build + idx.rs: big-endian IDX headers (0x803 images, 0x801 labels); pixels / 255."""
    d = DATA / "fashion-mnist"
    img = gzip.open(d / "t10k-images-idx3-ubyte.gz").read()
    lbl = gzip.open(d / "t10k-labels-idx1-ubyte.gz").read()
    magic, count, rows, cols = struct.unpack(">IIII", img[:16])
    lmagic, lcount = struct.unpack(">II", lbl[:8])
    assert (magic, lmagic, rows, cols) == (0x803, 0x801, 28, 28) and count == lcount
    assert len(img) == 16 + count * 784 and len(lbl) == 8 + count
    pixels = torch.frombuffer(bytearray(img[16:]), dtype=torch.uint8)
    labels = torch.frombuffer(bytearray(lbl[8:]), dtype=torch.uint8).to(torch.int64)
    return scale(pixels, 255.0).reshape(count, 1, 28, 28), labels, "pixel / 255 (fashion.rs, f32)"


def split(x, y, seed):
    """dataset.rs ImageDataset::split(0.2, seed): the first round(n*0.2) of a seeded shuffle
    are held out; both parts keep the original order."""
    n = len(y)
    n_test = int(math.floor(n * TEST_FRACTION + 0.5))  # f64::round (half away from zero)
    order = list(range(n))
    SplitMix64(seed).shuffle(order)
    is_test = torch.zeros(n, dtype=torch.bool)
    is_test[torch.tensor(order[:n_test], dtype=torch.int64)] = True
    return (x[~is_test], y[~is_test]), (x[is_test], y[is_test])


def batch_indices(n, batch, seed, salt, index):
    """data.rs ImageBatches::draw: batch `index` is `batch` draws with replacement."""
    rng = SplitMix64(seed ^ salt ^ ((index * GOLDEN) & MASK))
    return torch.tensor([rng.below(n) for _ in range(batch)], dtype=torch.int64)


def build_model(kind, shape, classes):
    c, h, w = shape
    if kind == "mlp":  # mlp.rs: hidden [128, 128], ReLU, dropout 0 (burn skips it at p = 0)
        return nn.Sequential(nn.Linear(c * h * w, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                             nn.Linear(128, classes))
    # convnet.rs: (Conv 3x3 same -> ReLU -> MaxPool 2x2 stride 2) x 2, flatten(1, 3), Linear.
    return nn.Sequential(nn.Conv2d(c, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(1), nn.Linear(32 * (h // 4) * (w // 4), classes))


def sync(device):
    if device.type == "cuda": torch.cuda.synchronize(device)


def train_step(model, opt, xs, ys, idx, device):
    x = xs.index_select(0, idx)  # data.load: a fresh host float32 batch
    y = ys.index_select(0, idx)
    x, y = x.to(device), y.to(device)  # transfer.h2d
    loss = F.cross_entropy(model(x), y)  # forward + loss (burn CrossEntropyLoss defaults: mean)
    opt.zero_grad(set_to_none=True)  # burn builds fresh gradients every step
    loss.backward()
    opt.step()
    sync(device)  # the one sync at the step end
    return loss.detach()


def unique_path(path):
    path = p = pathlib.Path(path)
    k = 1
    while p.exists():
        p, k = path.with_name(f"{path.stem}-{k}{path.suffix}"), k + 1
    return p


def activities(device, which="cpu+cuda"):
    cuda = which == "cpu+cuda" and device.type == "cuda"
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])


# torch.profiler's actions as the phases steptrace names (crates/steptrace/src/collect/schedule.rs).
PHASES = {ProfilerAction.NONE: "wait", ProfilerAction.WARMUP: "warmup",
          ProfilerAction.RECORD: "active", ProfilerAction.RECORD_AND_SAVE: "active"}


def parse_cycle(text):
    """`wait=7,warmup=1,active=2` as torch.profiler.schedule's keyword arguments."""
    cycle = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = part.partition("=")
        if key not in ("wait", "warmup", "active") or not value.isdigit() or key in cycle:
            raise ValueError(f"--schedule {text}: expected wait=W,warmup=U,active=A (each once, integers)")
        cycle[key] = int(value)
    if cycle.get("active", 0) < 1 or cycle.get("wait", 0) < 1:
        raise ValueError(f"--schedule {text}: interleaved needs wait >= 1 and active >= 1")
    return {"wait": cycle["wait"], "warmup": cycle.get("warmup", 0), "active": cycle["active"]}


def interleaved_figures(step_ms, phases):
    """Per phase: n, median and IQR of the step times; active/wait and warmup/wait of the medians."""
    by = {}
    for ms, phase in zip(step_ms, phases):
        by.setdefault(phase, []).append(ms)
    out = {}
    for phase, values in sorted(by.items()):
        q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
        out[phase] = {"n": len(values), "median_ms": statistics.median(values), "iqr_ms": q[2] - q[0]}
    wait = out.get("wait", {}).get("median_ms")
    for phase in ("active", "warmup"):
        if wait and phase in out:
            out[f"{phase}_over_wait"] = out[phase]["median_ms"] / wait
    out["phases"] = phases
    return out


def prepare(args):
    t = time.perf_counter()
    x, y, prep = load_digits() if args.dataset == "digits" else load_fashion()
    shape = tuple(x.shape[1:])
    (tx, ty), (vx, vy) = split(x, y, args.seed)
    if args.model == "mlp":  # data.rs ImageLayout::Flat: [batch, C*H*W]
        tx, vx = tx.reshape(len(ty), -1).contiguous(), vx.reshape(len(vy), -1).contiguous()
    data_ms = (time.perf_counter() - t) * 1000
    # Pure-Python SplitMix64 costs ~0.1 ms per batch; Rust's costs ~1 us. Draw every index up
    # front (identical for every run) so the language gap does not land in the step times.
    t = time.perf_counter()
    total = 1 + args.warmup + args.steps
    train_idx = [batch_indices(len(ty), args.batch, args.seed, 0, k) for k in range(total)]
    eval_idx = [batch_indices(len(vy), args.batch, args.seed, HELD_OUT_SALT, k) for k in range(EVAL_BATCHES)]
    info = {"dataset": "digits" if args.dataset == "digits" else "fashion-mnist-t10k",
            "source": "datasets/data/" + ("digits.csv.gz" if args.dataset == "digits" else "fashion-mnist/t10k-*-ubyte.gz"),
            "samples": len(y), "train_samples": len(ty), "held_out_samples": len(vy),
            "sample_shape": list(shape), "input_layout": "flat" if args.model == "mlp" else "NCHW",
            "preprocessing": prep,
            "split": "ImageDataset::split(0.2, seed): SplitMix64 shuffle, first round(n*0.2) held out",
            "batches": "batch k = `batch` draws with replacement, SplitMix64(seed ^ k*0x9E3779B97F4A7C15).below(n_train)",
            "held_out": f"{EVAL_BATCHES} batches drawn with replacement from the held-out 20%, salt 0x5EED7E57",
            "first_batch_indices": train_idx[0][:8].tolist(),
            "data_setup_ms": data_ms, "index_precompute_ms": (time.perf_counter() - t) * 1000}
    return (tx, ty, vx, vy), shape, train_idx, eval_idx, info


def new_model(args, shape, device):
    torch.manual_seed(args.seed)  # same start every run; init on the CPU, so CPU and CUDA agree
    model = build_model(args.model, shape, 10).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-5, weight_decay=0.0)
    return model, opt


def one_run(args, device, data, shape, train_idx, eval_idx, trace_dir):
    tx, ty, vx, vy = data
    sync(device)
    t_run = time.perf_counter()
    model, opt = new_model(args, shape, device)
    t0 = time.perf_counter()
    train_step(model, opt, tx, ty, train_idx[0], device)
    t1 = time.perf_counter()
    run = {"first_step_ms": (t1 - t0) * 1000, "time_to_first_step_ms": (t1 - t_run) * 1000,
           "process_start_to_first_step_ms": (t1 - PROCESS_START) * 1000}
    for k in range(1, 1 + args.warmup):
        train_step(model, opt, tx, ty, train_idx[k], device)
    prof, phase_of = None, None
    if args.profile == "active":
        # repeat=1: one cycle that ends at the last measured step (repeat=0 would start a new one).
        prof = profile(activities=activities(device),
                       schedule=schedule(wait=0, warmup=0, active=args.steps, repeat=1))
    elif args.profile == "interleaved":
        cycle = schedule(**args.cycle, repeat=0)
        phase_of = lambda k: PHASES[cycle(k)]  # the phase torch.profiler gives measured step k
        exported = []
        def ready(p):  # after a cycle's last active step, inside prof.step(): outside step time
            path = unique_path(pathlib.Path(trace_dir) / f"torch_{args.model}_b{args.batch}_cycle{len(exported)}.json")
            p.export_chrome_trace(str(path))
            exported.append(path)
        prof = profile(activities=activities(device, args.activities), schedule=cycle, on_trace_ready=ready)
    step_ms, prof_ms, losses = [], [], []
    t_window = time.perf_counter()
    with prof if prof is not None else contextlib.nullcontext():
        t_in = time.perf_counter()
        for k in range(1 + args.warmup, 1 + args.warmup + args.steps):
            ts = time.perf_counter()
            losses.append(train_step(model, opt, tx, ty, train_idx[k], device))
            te = time.perf_counter()
            step_ms.append((te - ts) * 1000)
            if prof is not None:  # like run.rs: profiler.step() is outside the step's time
                prof.step()
                prof_ms.append((time.perf_counter() - te) * 1000)
    run["step_ms"] = step_ms
    run["median_ms"] = statistics.median(step_ms)
    if phase_of is not None:
        run["interleaved"] = interleaved_figures(step_ms, [phase_of(k) for k in range(len(step_ms))])
        run["traces_exported"] = len(exported)
        if not args.trace_dir:
            for path in exported:
                path.unlink()
    run["measured_window_ms"] = (time.perf_counter() - t_window) * 1000
    if prof is not None:
        run["profiler_start_ms"] = (t_in - t_window) * 1000
        run["profiler_step_call_ms"] = prof_ms  # the last one stops and processes the trace
        if trace_dir is not None and args.profile == "active":
            path = unique_path(pathlib.Path(trace_dir) / f"torch_{args.model}_b{args.batch}_{device.type}.json")
            prof.export_chrome_trace(str(path))
            run["trace"] = {"path": str(path), "bytes": path.stat().st_size}
    last = losses[-10:]
    run["final_loss"] = torch.stack(last).mean().item()  # one read, after the window
    run["final_loss_over_steps"] = len(last)
    run["last_loss"] = losses[-1].item()
    model.eval()
    correct = seen = 0
    with torch.no_grad():
        for idx in eval_idx:
            x, y = vx.index_select(0, idx).to(device), vy.index_select(0, idx).to(device)
            correct += (model(x).argmax(1) == y).sum().item()
            seen += len(idx)
    run["held_out"] = {"metric": "accuracy", "value": correct / seen, "samples": seen,
                       "split": "data.rs ImageBatches::held_out, as on the Rust side"}
    return run, sum(p.numel() for p in model.parameters())


def kineto_fixture(args, device):
    """A small real torch.profiler trace (MLP, digits, batch 256) for testing a trace reader."""
    args.model, args.dataset, args.batch, args.warmup, args.steps = "mlp", "digits", 256, 0, 7
    data, shape, train_idx, _, _ = prepare(args)
    tx, ty = data[0], data[1]
    out = pathlib.Path(args.kineto_fixture)
    out.mkdir(parents=True, exist_ok=True)
    for active in (3, 2):
        path = unique_path(out / f"torch_kineto_mlp_b256_{device.type}_active{active}.json")
        model, opt = new_model(args, shape, device)
        with profile(activities=activities(device), record_shapes=False, with_stack=False,
                     schedule=schedule(wait=1, warmup=1, active=active, repeat=1),
                     on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
            for k in range(8):
                train_step(model, opt, tx, ty, train_idx[k], device)
                prof.step()
        size = path.stat().st_size
        print(f"kineto fixture: {path} ({size} bytes, active={active})")
        if size < 1_000_000:
            return
        if active == 3:
            print("  over 1 MB: removing it and retrying with active=2")
            path.unlink()


def precision(device):
    with warnings.catch_warnings():  # newer torch deprecates the allow_tf32 flags
        warnings.simplefilter("ignore")
        cuda = {"matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
                "cudnn_benchmark": torch.backends.cudnn.benchmark} if device.type == "cuda" else {}
        return {"dtype": "float32", "float32_matmul_precision": torch.get_float32_matmul_precision(), **cuda}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["mlp", "convnet"], default="mlp")
    ap.add_argument("--dataset", choices=["auto", "digits", "fashion-mnist"], default="auto",
                    help="auto: digits for mlp, fashion-mnist (t10k) for convnet")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=20, help="steps after step 0, not measured")
    ap.add_argument("--steps", type=int, default=100, help="measured steps")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--profile", choices=["off", "active", "interleaved"], default="off")
    ap.add_argument("--schedule", default="wait=7,warmup=1,active=2",
                    help="with --profile interleaved: the cycle, repeated over the measured steps")
    ap.add_argument("--activities", choices=["cpu+cuda", "cpu"], default="cpu+cuda",
                    help="with --profile interleaved: torch.profiler's activities")
    ap.add_argument("--out", help="JSON results (never overwritten)")
    ap.add_argument("--trace-dir", help="with --profile active: Chrome trace of run 0 here; "
                                        "with interleaved: every cycle's trace of every run")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--no-tf32", action="store_true", help="disable TF32 in cuBLAS and cuDNN")
    ap.add_argument("--cudnn-benchmark", action="store_true", help="cudnn autotuning (burn autotunes)")
    ap.add_argument("--kineto-fixture", metavar="DIR", help="only write a small torch.profiler trace")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda, but torch.cuda.is_available() is False")
    if args.batch < 1 or args.steps < 1 or args.runs < 1 or args.warmup < 0:
        ap.error("--batch, --steps and --runs must be >= 1, --warmup >= 0")
    if args.profile == "interleaved":
        try:
            args.cycle = parse_cycle(args.schedule)
        except ValueError as e:
            ap.error(str(e))
    if args.kineto_fixture is None and not args.out:
        ap.error("--out is required")
    if args.out and os.path.exists(args.out):
        ap.error(f"{args.out} exists; refusing to overwrite it")
    assert SplitMix64(0).next_u64() == 0xE220A8397B1DCDAF  # rng.rs reference value
    device = torch.device(args.device)
    if args.no_tf32:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    if args.dataset == "auto":
        args.dataset = "digits" if args.model == "mlp" else "fashion-mnist"
    if args.kineto_fixture is not None:
        return kineto_fixture(args, device)
    if args.trace_dir:
        os.makedirs(args.trace_dir, exist_ok=True)

    data, shape, train_idx, eval_idx, info = prepare(args)
    runs, n_params = [], 0
    for r in range(args.runs):
        trace_dir = None
        if args.profile == "active" and r == 0:
            trace_dir = args.trace_dir
        elif args.profile == "interleaved":
            trace_dir = args.trace_dir or tempfile.mkdtemp(prefix="torch-twin-")
        run, n_params = one_run(args, device, data, shape, train_idx, eval_idx, trace_dir)
        if args.profile == "interleaved" and not args.trace_dir:
            os.rmdir(trace_dir)
        runs.append(run)
    meds = [r["median_ms"] for r in runs]
    pooled = [x for r in runs for x in r["step_ms"]]
    q = statistics.quantiles(pooled, n=4) if len(pooled) > 1 else [pooled[0]] * 3
    mom = statistics.median(meds)
    result = {
        "tool": "pytorch", "torch_version": torch.__version__, "cuda_version": torch.version.cuda,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
        else f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)",
        "python": platform.python_version(), "model": args.model, "batch": args.batch,
        "warmup": args.warmup, "steps": args.steps, "seed": args.seed, "profile": args.profile,
        "runs": runs,
        "summary": {"median_of_medians_ms": mom, "min": min(pooled), "max": max(pooled),
                    "std": statistics.stdev(pooled) if len(pooled) > 1 else 0.0, "iqr": q[2] - q[0],
                    "samples_per_s": args.batch / (mom / 1000),
                    "spread_over": "min/max/std/iqr: all measured steps of all runs pooled, ms "
                                   "(iqr: statistics.quantiles, exclusive method)",
                    "run_medians_ms": meds},
        "timing": "perf_counter wall time per step, torch.cuda.synchronize once at each step end; "
                  "a step = index_select on host, .to(device), forward, loss, zero_grad, backward, "
                  "Adam step, sync. Step 0 is first_step_ms; then `warmup` unmeasured steps. "
                  "time_to_first_step_ms runs from the run's start (seed, model init, Adam, step 0); "
                  "data set-up is data.data_setup_ms, once per process. Run 0 alone carries CUDA "
                  "context and library start-up (see process_start_to_first_step_ms).",
        "parameters": n_params,
        "optimizer": {"name": "Adam", "lr": args.lr, "betas": [0.9, 0.999], "eps": 1e-5,
                      "weight_decay": 0.0, "amsgrad": False,
                      "implementation": "torch.optim.Adam defaults (foreach on CUDA)",
                      "matches": "burn-optim 0.21 AdamConfig::new() (eps added to sqrt(v_hat))"},
        "loss": "F.cross_entropy(logits, targets), mean (burn CrossEntropyLossConfig::new())",
        "precision": precision(device), "data": info,
    }
    if args.profile == "interleaved":
        ratios = [r["interleaved"].get("active_over_wait") for r in runs]
        warmups = [r["interleaved"].get("warmup_over_wait") for r in runs]
        result["interleaved"] = {
            "schedule": args.schedule, "activities": args.activities,
            "active_over_wait": ratios, "warmup_over_wait": warmups,
            "median_active_over_wait": statistics.median([x for x in ratios if x is not None] or [math.nan]),
            "method": "each process its own control: the median active step over the median wait "
                      "step of the same run, steps labelled by torch.profiler.schedule itself; "
                      "prof.step() (and each cycle's export) outside the step time",
        }
        print("active/wait per process: " + ", ".join(f"{x:.4f}" for x in ratios if x is not None))
    with open(args.out, "x") as f:
        json.dump(result, f, indent=1)
    r0 = runs[0]
    print(f"pytorch {args.model}/{info['dataset']} batch {args.batch} on {result['device_name']}, profile "
          f"{args.profile}: median of {args.runs} run medians {mom:.3f} ms/step ({args.batch / (mom / 1000):.0f} "
          f"samples/s), run 0 first step {r0['first_step_ms']:.1f} ms, final loss {r0['final_loss']:.4f}, "
          f"held-out accuracy {r0['held_out']['value']:.4f} -> {args.out}")


if __name__ == "__main__":
    main()
