"""Regenerate the committed peer fixtures (conformance/peers/fixtures/*.npz) from the real libraries.

    python conformance/peers/make_fixtures.py torch      # torch as installed: its version and CPU dispatch
    ATEN_CPU_CAPABILITY=default python conformance/peers/make_fixtures.py torch
    python conformance/peers/make_fixtures.py xla        # jax / jaxlib on the CPU
    LOWBIT=build/tools/lowbit/lowbit python conformance/peers/make_fixtures.py torchao
                                                         # torchao's NVFP4 quantizers (test_torchao's
                                                         # cases, a few of the ordinary tensors)
    LOWBIT=build/tools/lowbit/lowbit python conformance/peers/make_fixtures.py mmasim
                                                         # MMA-Sim's models (test_mmasim's cases; lowbit
                                                         # runs beside it, its results are not stored)

Each run writes one file named after the peer, its version and how it ran, holding peerlib.fixture_inputs
and the codes the peer gave for them, with the lowbit profile that must reproduce them.  The quick tier's
test_fixtures.py replays every file through `lowbit` without the peers installed.  Run with the Python of
requirements-peers.txt (the versions pinned there are the versions the files record).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import peerlib  # noqa: E402

FIXTURES = os.path.join(HERE, "fixtures")


def inputs_key(source, target):
    """f32 inputs depend on the target (its midpoints); the others are the source's alone."""
    return f"in_{source}_{target}" if source == "f32" else f"in_{source}"


def torch_fixture():
    import test_torch as t
    cap = t.capability()
    ver = t.torch.__version__.split("+")[0]
    w = peerlib.FixtureWriter({"peer": "torch", "version": ver, "cpu_capability": cap,
                               "how": "x.to(dtype) on the CPU, contiguous and strided[::2] tensors"})
    for layout in ("contiguous", "strided"):
        profile = t.profile_for(layout)
        if profile is None:
            continue
        # Only the targets where the profile differs from torch's: the variants' rows.
        targets = t.TARGETS
        if profile == "torch-2.12":
            targets = ["e4m3"]
        if profile in ("torch-default", "torch-strided"):
            targets = ["bf16", "f16"]
        for source in t.SOURCES:
            for target in targets:
                inputs = peerlib.fixture_inputs(source, target)
                if cap == "DEFAULT" and layout == "strided" and (source, target) == ("f32", "f16"):
                    inputs = inputs[~peerlib.is_nan(source, inputs)]
                key = inputs_key(source, target)
                if cap == "DEFAULT" and layout == "strided" and (source, target) == ("f32", "f16"):
                    key += "_without_nan"
                w.add({"profile": profile, "source": source, "target": target, "label": f"torch {ver} {cap} {layout}"},
                      key, inputs, t.torch_cast(source, target, inputs, layout))
    name = f"torch-{ver}-{cap.lower()}.npz"
    w.save(os.path.join(FIXTURES, name))
    return name


def xla_fixture():
    import test_xla as t
    ver = t.jax.__version__
    import jaxlib
    w = peerlib.FixtureWriter({"peer": "jax", "version": ver, "jaxlib": jaxlib.__version__,
                               "how": "jax.jit(lambda v: v.astype(t)) on the CPU"})
    for source in t.SOURCES:
        for target in t.TARGETS:
            inputs = peerlib.fixture_inputs(source, target)
            w.add({"profile": "xla", "source": source, "target": target, "label": f"jax {ver} XLA CPU"},
                  inputs_key(source, target), inputs, t.xla_cast(source, target, inputs))
    name = f"jax-{ver}.npz"
    w.save(os.path.join(FIXTURES, name))
    return name


def torchao_fixture():
    import numpy as np
    import test_torchao as t
    import torchao
    ver = torchao.__version__.split("+")[0]
    w = peerlib.FixtureWriter({"peer": "torchao", "version": ver,
                               "how": "nvfp4_tensor.nvfp4_quantize (single and two levels) and mx_tensor.to_mx on the CPU"})
    every = t.cases(np.random.default_rng(20261201))
    kept = every[::5] + every[-2:]  # some ordinary tensors, the tie blocks, the clamp blocks
    for two in (False, True):
        for i, x in enumerate(kept):
            codes, scales, ts = t.torchao_nvfp4(x, two)
            w.add_arrays({"two_level": two, "label": f"torchao {ver} nvfp4 {'two' if two else 'one'} level {i}"},
                         x=x, codes=codes, scales=scales,
                         tensor_scale=None if ts is None else np.array([ts], np.uint32))
    rng = np.random.default_rng(20261202)
    for element in t.MX_TYPES:
        for rule in t.MX_RULES:
            for i, x in enumerate(t.mx_cases(rng, nonfinite=element in ("e4m3", "e5m2"))[-2:]):
                codes, scales = t.torchao_mx(x, element, rule)
                w.add_arrays({"scheme": "mx", "element": element, "rule": rule,
                              "label": f"torchao {ver} to_mx {element} {rule} {i}"}, x=x, codes=codes, scales=scales)
    name = f"torchao-{ver}.npz"
    w.save(os.path.join(FIXTURES, name))
    return name


def main(argv):
    makers = {"torch": torch_fixture, "xla": xla_fixture}
    try:
        import test_torchao  # noqa: F401
        makers["torchao"] = torchao_fixture
    except ImportError:
        pass
    try:
        import test_mmasim
        makers["mmasim"] = test_mmasim.write_fixture
    except ImportError:
        pass
    if len(argv) != 2 or argv[1] not in ("torch", "xla", "mmasim", "torchao"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[1] not in makers:
        print(f"make_fixtures: {argv[1]} needs its peer installed (pip install -r requirements-peers.txt)",
              file=sys.stderr)
        return 2
    os.makedirs(FIXTURES, exist_ok=True)
    print(makers[argv[1]]())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
