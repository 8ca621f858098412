"""Regenerates fixtures/gradscaler.json: PyTorch's own GradScaler (torch.amp.GradScaler("cpu")) driven through
real scale / backward / step / update calls on a one-parameter model, its state_dict and f32 scale recorded after
every update.  On the CPU, update() calls torch._amp_update_scale_, whose CPU kernel
(aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp, _amp_update_scale_cpu_kernel) is what
`lowbit state step` reproduces.  A step's gradient is 1, or Inf / NaN on the steps marked found_inf.

Each case also saves the state_dict halfway, loads it into a fresh GradScaler and runs the rest of the steps
from there: "restored" holds that run's states (torch's own restore, for the save/restore tests).

    python make_gradscaler.py [OUT]     (requirements-peers.txt; about 2 s on the CPU)
"""
import json
import math
import struct
import sys

import torch

# (name, init_scale, growth_factor, backoff_factor, growth_interval, the steps' found_inf pattern)
CASES = [
    ("defaults-short-interval", 2.0**16, 2.0, 0.5, 3, "ffffffiffffffnfff"),
    # Factors that are not powers of two: each product is f32 * f64 rounded to f64, then to f32.
    ("non-binary-factors", 1000.0, 1.7, 0.3, 2, "ffffiffifffffiiffff"),
    ("factor-0.9-1.1", 3.0, 1.1, 0.9, 1, "fffffifififfffffff"),
    # Growth past FLT_MAX: the kernel keeps the scale (std::isfinite check); the tracker still resets.
    ("growth-past-flt-max", 2.0**127, 2.0, 0.5, 2, "ffffifffff"),
    # Backoff down through the subnormals to zero (no lower bound in the kernel).
    ("backoff-to-zero", 2.0**-140, 1.5, 0.25, 5, "iiiiiiffffff"),
]


def f32_bits(t):
    return "0x%08x" % struct.unpack("<I", struct.pack("<f", t.item()))[0]


def state_of(scaler):
    sd = scaler.state_dict()
    return {
        "scale": f32_bits(scaler._scale),
        "growth_tracker": sd["_growth_tracker"],
        "growth_factor": sd["growth_factor"],
        "backoff_factor": sd["backoff_factor"],
        "growth_interval": sd["growth_interval"],
    }


def one_step(scaler, p, opt, flag):
    g = {"f": 1.0, "i": math.inf, "n": math.nan}[flag]
    opt.zero_grad()
    loss = (p * g).sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()


def make_scaler(init, growth, backoff, interval):
    return torch.amp.GradScaler("cpu", init_scale=init, growth_factor=growth, backoff_factor=backoff,
                                growth_interval=interval)


def run_case(name, init, growth, backoff, interval, pattern):
    p = torch.nn.Parameter(torch.zeros(1, dtype=torch.float32))
    opt = torch.optim.SGD([p], lr=0.0)
    scaler = make_scaler(init, growth, backoff, interval)
    # The scale tensor exists from the first scale() call; record the initial state the way torch builds it.
    scaler._lazy_init_scale_growth_tracker(p.device)
    initial = state_of(scaler)
    states, saved, restored = [], None, []
    half = len(pattern) // 2
    for k, flag in enumerate(pattern):
        one_step(scaler, p, opt, flag)
        states.append(state_of(scaler))
        if k + 1 == half:
            saved = scaler.state_dict()
    # torch's restore: a fresh scaler loads the halfway state_dict and runs the remaining steps.
    q = torch.nn.Parameter(torch.zeros(1, dtype=torch.float32))
    opt2 = torch.optim.SGD([q], lr=0.0)
    again = make_scaler(1.0, 2.0, 0.5, 1)
    again.load_state_dict(saved)
    for flag in pattern[half:]:
        one_step(again, q, opt2, flag)
        restored.append(state_of(again))
    return {
        "name": name,
        "initial": initial,
        "found_inf": [c != "f" for c in pattern],
        "gradient": ["1" if c == "f" else ("inf" if c == "i" else "nan") for c in pattern],
        "states": states,
        "saved_after_step": half,
        "restored": restored,
    }


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else __file__.replace("make_gradscaler.py", "fixtures/gradscaler.json")
    doc = {"torch": torch.__version__.split("+")[0], "cases": [run_case(*c) for c in CASES]}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
