"""lowbit.vectors: generate writes the command line's bytes; load verifies a suite and gives its arrays."""
import os

import numpy as np
import pytest

import lowbit
from conftest import cli


def tree(folder):
    """{relative path: bytes} of every file under `folder`."""
    out = {}
    for root, _, files in os.walk(folder):
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, folder)] = open(p, "rb").read()
    return out


@pytest.mark.parametrize("suite,seed", [("scheme-nvfp4", 1), ("gemm-exact", 3), ("convert-ocp", 1)])
def test_generate_writes_the_command_lines_bytes(tmp_path, suite, seed):
    lowbit.vectors.generate(suite, tmp_path / "module", seed=seed)
    cli("vectors", "generate", "--suite", suite, "--out", tmp_path / "cli", "--seed", seed)
    module, command_line = tree(tmp_path / "module"), tree(tmp_path / "cli")
    assert "manifest.json" in module and len(module) > 2
    assert module == command_line


def test_load_gives_the_files_arrays(tmp_path):
    lowbit.vectors.generate("scheme-nvfp4", tmp_path / "s")
    suite = lowbit.vectors.load(tmp_path / "s")
    assert suite.name == "scheme-nvfp4" and suite.kind == "scheme" and len(suite.cases) == len(suite.manifest["cases"])
    for case, entry in zip(suite.cases, suite.manifest["cases"]):
        assert case.name == entry["name"] and case.recipe == entry["recipe"]
        folder = tmp_path / "s" / f"case-{entry['index']:03d}"
        x = np.load(folder / "x.npy")
        assert case.inputs["x"].dtype == np.float32 and np.array_equal(case.inputs["x"].view(np.uint32), x.view(np.uint32))
        codes = np.load(folder / "codes.npy")
        assert case.expected["codes"].dtype.name == "float4_e2m1fn"
        assert np.array_equal(case.expected["codes"].view(np.uint8), codes)
        assert not case.expected["codes"].flags.writeable


def test_load_convert_files_as_arrays(tmp_path):
    lowbit.vectors.generate("convert-ocp", tmp_path / "c")
    suite = lowbit.vectors.load(tmp_path / "c")
    (case,) = [c for c in suite.cases if c.name == "f16/rne-nosat-keep-after/f32.txt"]
    assert case.recipe == {"from": "f32", "to": "f16", "rounding": "rne", "overflow": "nosat", "subnormals": "keep",
                           "tininess": "after", "profile": "ocp"}
    x, codes = case.inputs["x"], case.expected["codes"]
    assert x.dtype == np.float32 and codes.dtype == np.float16 and x.shape == codes.shape
    # Independent of lowbit: numpy's IEEE cast gives the same codes for every input that is not a NaN.
    ok = ~np.isnan(x)
    with np.errstate(over="ignore"):
        assert np.array_equal(x[ok].astype(np.float16).view(np.uint16), codes[ok].view(np.uint16))
    assert case.expected["flags"].dtype == np.uint8 and case.expected["flags"].shape == x.shape


def test_damaged_suite_and_bad_arguments(tmp_path):
    lowbit.vectors.generate("scheme-tensor", tmp_path / "t")
    target = tmp_path / "t" / "case-000" / "x.npy"
    data = bytearray(target.read_bytes())
    data[-1] ^= 1
    target.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="case-000/x.npy"):
        lowbit.vectors.load(tmp_path / "t")
    with pytest.raises(ValueError, match="^suite: "):
        lowbit.vectors.generate("no-such-suite", tmp_path / "u")
    assert not (tmp_path / "u").exists()
    with pytest.raises(ValueError, match="^out: "):
        lowbit.vectors.generate("scheme-tensor", tmp_path / "t")  # not empty
    with pytest.raises(ValueError, match="seed"):
        lowbit.vectors.generate("scheme-tensor", tmp_path / "v", seed=-1)
    assert [s.name for s in lowbit.vectors.suites()][:1] == ["convert-ocp"]


@pytest.mark.parametrize("suite,shape,layout", [("scheme-tensor", "4x40,3x17", None),
                                                ("gemm-f32-sequential", "5x6x7,2x3x33", "nt"),
                                                ("gemm-exact", "4x4x9", "tn")])
def test_generate_at_kernel_shapes_writes_the_command_lines_bytes(tmp_path, suite, shape, layout):
    lowbit.vectors.generate(suite, tmp_path / "module", shape=shape, layout=layout)
    args = ["vectors", "generate", "--suite", suite, "--out", tmp_path / "cli", "--shape", shape]
    cli(*args, *(["--layout", layout] if layout else []))
    module = tree(tmp_path / "module")
    assert module == tree(tmp_path / "cli")
    # The shapes reach the files: the first case's input has the first shape's rows and columns.
    first = lowbit.vectors.load(tmp_path / "module").cases[0]
    dims = [int(v) for v in shape.split(",")[0].split("x")]
    if suite.startswith("scheme"):
        assert first.inputs["x"].shape == tuple(dims)
    else:
        m, n, k = dims
        assert first.inputs["a"].shape == ((k, m) if layout[0] == "t" else (m, k))
        assert first.inputs["b"].shape == ((n, k) if layout[1] == "t" else (k, n))


def test_bad_shape_options_name_the_option(tmp_path):
    with pytest.raises(ValueError, match="shape"):
        lowbit.vectors.generate("scheme-tensor", tmp_path / "a", shape="4abc")
    with pytest.raises(ValueError, match="layout"):
        lowbit.vectors.generate("gemm-exact", tmp_path / "b", shape="4x4x4", layout="xy")
    # shape=True is --shape without a value; a conversion suite takes no shape.
    with pytest.raises(ValueError, match="shape"):
        lowbit.vectors.generate("convert-ocp", tmp_path / "c", shape=True)
    with pytest.raises(TypeError, match="shape"):
        lowbit.vectors.generate("scheme-tensor", tmp_path / "d", shape=4)
    assert not any((tmp_path / n).exists() for n in "abcd")
