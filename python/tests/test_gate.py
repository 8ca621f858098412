"""lowbit.testing.gate on Python subjects: a passing subject, one flipped code named in the report, a
subject that compares nothing, require, a raising subject, results of the wrong shape, JUnit and JSON.

The passing subject is numpy's own f32 -> f16 cast (IEEE 754 round to nearest even) with the NaN rule of
IEEE 754-2019 section 6.2.3 (the payload's leading bits kept, the result quiet), independent of lowbit.
"""
import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import lowbit
from lowbit.testing import GateFailure, gate


def numpy_f16(batch):
    """f32 codes -> f16 codes by numpy, NaNs by IEEE 754's payload rule (sign, quiet bit, top 9 payload bits)."""
    x = np.asarray(batch).view(np.float32)
    with np.errstate(over="ignore"):
        out = x.astype(np.float16).view(np.uint16).copy()
    bits = x.view(np.uint32)
    nan = np.isnan(x)
    out[nan] = ((bits[nan] >> 16) & 0x8000) | 0x7E00 | ((bits[nan] >> 13) & 0x1FF)
    return out.view(np.float16)


class NumpyCast:
    name = "numpy f32->f16"

    def __init__(self, flip_input=None):
        self.flip_input = flip_input  # an f32 bit pattern whose result gets its low bit flipped

    def convert(self, batch, recipe):
        if (recipe["from"], recipe["to"], recipe["rounding"], recipe["overflow"], recipe["subnormals"]) != \
                ("f32", "f16", "rne", "nosat", "keep"):
            return None
        out = numpy_f16(batch).view(np.uint16).copy()
        if self.flip_input is not None:
            out[np.asarray(batch).view(np.uint32) == self.flip_input] ^= 1
        return out.view(np.float16)


def test_a_right_subject_passes():
    result = gate(NumpyCast(), "convert-ocp", require=["convert-ocp"])
    assert result.passed and result.returncode == 0 and result.failures == []
    (suite,) = result.suites
    assert suite["name"] == "convert-ocp" and suite["mismatches"] == 0 and suite["errors"] == 0
    assert suite["compared"] == 1 and suite["cases"] > 1000  # f16/rne-nosat-keep-after/f32.txt only
    text = str(result)
    assert text.startswith("subject: numpy f32->f16 (Python, in process)\nconvert-ocp: ")
    assert "all match: 1 suite" in text


def test_one_wrong_code_fails_with_the_element_named():
    with pytest.raises(GateFailure) as e:
        gate(NumpyCast(flip_input=0x40800000), "convert-ocp")
    message = str(e.value)
    assert e.value.result.returncode == 1
    lines = [l for l in message.splitlines() if "0x40800000" in l]
    assert len(lines) == 1, message
    # The file, the input and both codes with their values, as `lowbit gate` prints a mismatch.
    assert "convert-ocp f16/rne-nosat-keep-after/f32.txt case " in lines[0]
    assert "input 0x40800000 (4): expected 0x4400 (4)" in lines[0] and "actual 0x4401 (" in lines[0]
    assert "  why: 1 mismatching case" in message


class DeclinesAll:
    def convert(self, batch, recipe):
        return None


def test_nothing_compared_fails():
    with pytest.raises(GateFailure) as e:
        gate(DeclinesAll(), ["convert-ocp", "scheme-tensor"], max_report=1000)
    assert e.value.result.cases == 0
    assert "why: nothing was compared" in str(e.value)
    # scheme-tensor needs quantize, which the subject lacks: skipped with that reason.
    assert "has no quantize entry point" in str(e.value)
    result = gate(DeclinesAll(), "convert-ocp", check=False)
    assert not result.passed and result.returncode == 1


def test_require_fails_a_suite_that_compared_nothing():
    # convert-ocp compares cases, scheme-tensor none: passes unless scheme-tensor is required.
    assert gate(NumpyCast(), ["convert-ocp", "scheme-tensor"]).passed
    with pytest.raises(GateFailure) as e:
        gate(NumpyCast(), ["convert-ocp", "scheme-tensor"], require=["scheme-*"])
    assert "scheme-tensor" in "\n".join(e.value.result.failures)
    with pytest.raises(ValueError, match="require: 'gemm-\\*' matches no suite of this run"):
        gate(NumpyCast(), ["convert-ocp"], require=["gemm-*"])


def test_min_cases():
    with pytest.raises(GateFailure, match="why: "):
        gate(NumpyCast(), "convert-ocp", min_cases=10**9)
    with pytest.raises(ValueError, match="min_cases"):
        gate(NumpyCast(), "convert-ocp", min_cases=0)


class Raises:
    def quantize(self, x, recipe):
        raise RuntimeError("kernel launch failed")


def test_a_raising_subject_is_an_error_of_each_case():
    result = gate(Raises(), "scheme-tensor", check=False, max_report=1)
    (suite,) = result.suites
    assert suite["errors"] == len(suite["units"]) > 0 and suite["cases"] == 0
    assert "the plugin's quantize failed: RuntimeError: kernel launch failed" in str(result)
    assert "(1 of " in str(result) and "max_report=N shows more" in str(result)


class WrongShape:
    def gemm(self, a, b, recipe, **inputs):
        return np.zeros((a.shape[0] + 1, b.shape[1]), np.float32)


class WrongDtype:
    def gemm(self, a, b, recipe, **inputs):
        return np.zeros((a.shape[0], b.shape[1]), np.float64)


def test_results_of_the_wrong_shape_or_dtype_are_errors_naming_them():
    text = str(gate(WrongShape(), "gemm-f32-sequential", check=False, max_report=1))
    assert "ValueError: d: shape (5, 3), expected (4, 3)" in text
    text = str(gate(WrongDtype(), "gemm-f32-sequential", check=False, max_report=1))
    assert "d: holds f64 values (dtype float64), not f32" in text


def test_junit_and_json(tmp_path):
    junit, report = tmp_path / "gate.xml", tmp_path / "gate.json"
    with pytest.raises(GateFailure):
        gate(NumpyCast(flip_input=0x40800000), ["convert-ocp"], junit=junit, json=report)
    doc = json.loads(report.read_text())
    assert doc["command"] == "gate" and doc["subject"] == "numpy f32->f16" and doc["passed"] is False
    assert doc["totals"]["mismatching_cases"] == 1
    root = ET.parse(junit).getroot()
    failures = [tc for tc in root.iter("testcase") if tc.find("failure") is not None]
    assert [tc.get("name") for tc in failures] == ["f16/rne-nosat-keep-after/f32.txt"]


def test_bad_arguments():
    with pytest.raises(TypeError, match="subject: object has none of convert, quantize, gemm"):
        gate(object(), "convert-ocp")
    with pytest.raises(ValueError, match="suite"):
        gate(NumpyCast(), "no-such-suite")
    with pytest.raises(ValueError, match="suites: empty"):
        gate(NumpyCast(), [])


class SequentialF32:
    """The f32-sequential GEMM in numpy (acc = fl(acc + fl(a * b)) from C, in K order: vectors/SPEC.md),
    reading A and B in the storage the recipe's layout names unless `ignore_layout`."""

    def __init__(self, ignore_layout=False):
        self.ignore_layout = ignore_layout
        self.shapes = []

    def gemm(self, a, b, recipe, c=None, **inputs):
        layout = "nn" if self.ignore_layout else recipe.get("layout", "nn")
        a = np.asarray(a, np.float32)
        b = np.asarray(b, np.float32)
        self.shapes.append((a.shape, b.shape, layout))
        if layout[0] == "t":
            a = a.T
        if layout[1] == "t":
            b = b.T
        if a.shape[1] != b.shape[0]:
            raise ValueError(f"A {a.shape} and B {b.shape} do not agree under layout {layout}")
        acc = np.zeros((a.shape[0], b.shape[1]), np.float32) if c is None else np.array(c, np.float32)
        for k in range(a.shape[1]):
            acc = (acc + np.outer(a[:, k], b[k, :]).astype(np.float32)).astype(np.float32)
        return acc


def test_the_gate_at_kernel_shapes_and_an_nt_layout():
    subject = SequentialF32()
    result = gate(subject, "gemm-f32-sequential", shape="5x6x7,2x3x33", layout="nt", require="gemm-*")
    assert result.passed and result.cases > 0
    # Every case reached the subject in the nt storage: A [M, K], B [N, K].
    assert {s for s in subject.shapes} == {((5, 7), (6, 7), "nt"), ((2, 33), (3, 33), "nt")}
    # A subject that ignores the layout fails, each failure named.
    text = str(gate(SequentialF32(ignore_layout=True), "gemm-f32-sequential", shape="5x6x7,2x3x33", layout="nt",
                    check=False))
    assert "FAILED" in text and "random-2x3x33" in text
    with pytest.raises(ValueError, match="shape"):
        gate(subject, None, shape="5x6x7")
    with pytest.raises(ValueError, match="layout"):
        gate(subject, "gemm-f32-sequential", shape="5x6x7", layout="nx")


class Layer:
    """A fused layer for the contract-* suites: lowbit.contract.run on the case's request (what a kernel's
    wrapper returns), keeping `keep` of its stages (all of them by default), with one output code flipped in the
    cases of `flip_pass`."""

    def __init__(self, keep=None, flip_pass=None, decline_pass=None):
        self.keep, self.flip_pass, self.decline_pass, self.requests = keep, flip_pass, decline_pass, []

    def contract(self, request, **inputs):
        self.requests.append((request["pass"], tuple(sorted(inputs)), "sr_seed" in request))
        if request["pass"] == self.decline_pass:
            return None
        run = lowbit.contract.run(request["contract"], pass_=request["pass"], sr_seed=request.get("sr_seed"),
                                  **inputs)
        stages = {k: run[k] for k in run.keys() if self.keep is None or k in self.keep}
        if request["pass"] == self.flip_pass:
            out = np.array(stages["output"]).view(np.uint16).copy()
            out[0, 0] ^= 1
            stages["output"] = out.view(stages["output"].dtype)
        return stages


def test_a_contract_subject_is_gated_on_every_stage_it_gives():
    whole = Layer()
    result = gate(whole, "contract-te-current@sm90", require="contract-*")
    (suite,) = result.suites
    assert result.passed and suite["compared"] == len(suite["units"]) == 9
    # Each pass got its own inputs: fprop x, w and the bias; dgrad dy, w; wgrad dy, x; no seed (none rounds
    # stochastically).
    assert set(whole.requests) == {("fprop", ("bias", "w", "x"), False), ("dgrad", ("dy", "w"), False),
                                   ("wgrad", ("dy", "x"), False)}
    # The output alone is enough, and fewer elements are compared.
    alone = gate(Layer(keep={"output"}), "contract-te-current@sm90")
    assert alone.passed and 0 < alone.cases < result.cases
    # te-nvfp4's wgrad rounds dY stochastically: its request carries the suite's seed.
    seeded = Layer(keep={"output"})
    assert gate(seeded, "contract-te-nvfp4@sm100").passed
    assert ("wgrad", ("dy", "x"), True) in seeded.requests and ("fprop", ("bias", "w", "x"), False) in seeded.requests


def test_a_contract_subject_that_differs_fails_naming_the_element():
    result = gate(Layer(keep={"output"}, flip_pass="dgrad"), "contract-deepseek-v3@sm90", check=False)
    assert not result.passed and result.returncode == 1
    text = str(result)
    assert "3 mismatching" in text
    assert "contract-deepseek-v3@sm90 case-003 dgrad/random-16x160x24 case-003/output.npy[0, 0]: expected" in text


def test_a_contract_subject_without_output_or_with_an_unknown_stage_is_an_error():
    class NoOutput:
        def contract(self, request, **inputs):
            return {"accumulator": np.zeros((1, 1), np.float32)}

    class Unknown:
        def contract(self, request, **inputs):
            return {"output": None, "epilogue[9].gelu": None}

    text = str(gate(NoOutput(), "contract-torchao-nvfp4@sm100", check=False, max_report=1))
    assert "KeyError: \"the result has no 'output' (it has accumulator)\"" in text and "3 in error" in text
    text = str(gate(Unknown(), "contract-torchao-nvfp4@sm100", check=False, max_report=1))
    assert "'epilogue[9].gelu' is not a stage of this case" in text
    # A subject that declines a pass has those cases skipped; without the contract method every case is.
    result = gate(Layer(decline_pass="wgrad"), "contract-te-mxfp8@sm100", check=False)
    (suite,) = result.suites
    assert result.passed and suite["skipped"] == 3 and suite["compared"] == 6
    result = gate(NumpyCast(), "contract-te-mxfp8@sm100", check=False)
    assert not result.passed and "no contract entry point" in str(result)
