"""Quick tier: the committed peer fixtures (fixtures/*.npz, written by make_fixtures.py from torch, jax and
MMA-Sim themselves) replayed through `lowbit`, so that every CI run checks the profiles and models against
what those libraries gave, without installing them.  Each case names the profile (or model) that must
reproduce the peer's codes bit for bit."""
import glob
import os

import numpy as np
import pytest

import peerlib

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = sorted(glob.glob(os.path.join(HERE, "fixtures", "*.npz")))
CASTS = [f for f in FILES if not os.path.basename(f).startswith(("mmasim", "torchao"))]


def test_fixtures_present():
    names = {os.path.basename(f) for f in FILES}
    for want in ("torch-2.15.0-avx512.npz", "torch-2.15.0-default.npz", "torch-2.12.1-avx512.npz", "jax-0.10.2.npz"):
        assert want in names, f"fixture {want} is missing (conformance/peers/make_fixtures.py writes it)"


@pytest.mark.parametrize("path", CASTS, ids=[os.path.basename(f) for f in CASTS])
def test_cast_fixture(path):
    meta, cases = peerlib.load_fixture(path)
    assert cases, f"{path} holds no case"
    failures = []
    for row, inputs, outputs in cases:
        c = peerlib.compare(f"{row['label']} vs --profile {row['profile']}", row["source"], row["target"],
                            row["profile"], inputs, outputs, meta["peer"])
        if c.bad.size:
            failures.append(c.report(6))
    assert not failures, f"{len(failures)} of {len(cases)} cases differ ({meta}):\n" + "\n".join(failures[:8])


GEMMS = [f for f in FILES if os.path.basename(f).startswith("mmasim")]


def test_gemm_fixtures_present():
    assert any(os.path.basename(f) == "mmasim-2.1.1.npz" for f in GEMMS), \
        "fixture mmasim-2.1.1.npz is missing (conformance/peers/make_fixtures.py mmasim writes it)"


@pytest.mark.parametrize("path", GEMMS, ids=[os.path.basename(f) for f in GEMMS])
def test_gemm_fixture(path):
    """MMA-Sim's dot products (test_mmasim.py's cases) through `lowbit gemm --model`, on the outputs that
    test compares (the mask leaves out those where MMA-Sim 2.1.1's zero-term exponent decides)."""
    meta, cases = peerlib.load_fixture(path)
    models = set()
    failures = []
    compared = 0
    for row, arrays, _ in cases:
        got = peerlib.lowbit_gemm(row["model"], row["a_format"], row["b_format"], arrays["a"], arrays["b"],
                                  arrays["c"], row["scale_format"], arrays.get("sa"), arrays.get("sb"))
        keep = arrays["keep"]
        want = arrays["d"].astype(np.uint64)
        compared += int(keep.sum())
        models.add(row["model"])
        for i, j in zip(*np.nonzero((want != got) & keep)):
            failures.append(f"{row['model']} {row['label']} [{i},{j}]: mmasim {int(want[i, j]):#x}, lowbit {int(got[i, j]):#x}")
    assert compared > 0, "nothing was compared"
    assert len(models) == 15, sorted(models)
    assert not failures, f"{len(failures)} outputs differ ({meta}):\n" + "\n".join(failures[:10])


SCHEMES = [f for f in FILES if os.path.basename(f).startswith("torchao")]


def test_scheme_fixtures_present():
    assert any(os.path.basename(f) == "torchao-0.18.0.npz" for f in SCHEMES), \
        "fixture torchao-0.18.0.npz is missing (conformance/peers/make_fixtures.py torchao writes it)"


@pytest.mark.parametrize("path", SCHEMES, ids=[os.path.basename(f) for f in SCHEMES])
def test_scheme_fixture(path):
    """torchao's NVFP4 and to_mx (test_torchao.py's cases) through `lowbit quantize`: codes, block scales and
    the tensor scale bit for bit."""
    meta, cases = peerlib.load_fixture(path)
    failures = []
    compared = 0
    levels = set()
    for row, arrays, _ in cases:
        if row.get("scheme") == "mx":
            codes, scales, _ = peerlib.lowbit_scheme(arrays["x"], ["--scheme", "mx", "--element", row["element"],
                                                                   "--scale-rule", row["rule"], "--profile", "torchao"])
            levels.add("mx")
            for name in ("codes", "scales"):
                w, g = arrays[name], {"codes": codes, "scales": scales}[name]
                compared += w.size
                if w.shape != g.shape or (w != g).any():
                    failures.append(f"{row['label']} {name}")
            continue
        codes, scales, ts = peerlib.lowbit_nvfp4(arrays["x"], row["two_level"])
        levels.add(row["two_level"])
        want = [arrays["codes"], arrays["scales"]] + ([arrays["tensor_scale"]] if row["two_level"] else [])
        got = [codes, scales] + ([np.array([ts], np.uint32)] if row["two_level"] else [])
        for name, w, g in zip(("codes", "scales", "tensor scale"), want, got):
            compared += w.size
            if w.shape != g.shape or (w != g).any():
                failures.append(f"{row['label']} {name}")
    assert compared > 10_000 and levels == {False, True, "mx"}
    assert not failures, f"{len(failures)} arrays differ ({meta}):\n" + "\n".join(failures[:10])
