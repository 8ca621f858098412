"""Assertions for tests of kernels against lowbit: bits, not tolerances.

``assert_bitexact`` compares codes and reports the first mismatches as ``lowbit check`` does: the element's
index, its input (when given), and the expected and actual codes with their exact values.  ``gate`` runs
golden suites through a Python subject as ``lowbit gate`` runs a plugin; ``gate_tests`` makes one pytest
test per suite of it.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _lowbit
from ._arrays import source
from ._formats import format_name


def _code_and_value(fmt: str, code: int) -> str:
    """"0x7e (448)": a code and its exact value as ``lowbit check`` prints them (lowbit/text.hpp)."""
    return _lowbit.code_and_value(fmt, code)


def assert_bitexact(actual: Any, expected: Any, *, fmt: Any = None, inputs: Any = None, max_report: int = 10) -> None:
    """Assert that two arrays hold the same codes, element for element (NaN codes included).

    `actual` and `expected` are arrays of codes in a format's dtype (float8_e4m3fn, bfloat16, float32, ...),
    lowbit.Codes, or unsigned integers with `fmt`.  `inputs` (optional, shaped as they are) are shown beside
    each mismatch.  On a difference, the AssertionError lists the first `max_report` mismatches as
    ``lowbit check`` does (index, input, expected and actual code with its exact value).  Comparing nothing
    (two empty arrays) fails too: a test that compared no element has shown nothing.

    Example:
        >>> import lowbit, numpy as np
        >>> x = np.array([0.3, 480.0], np.float32)
        >>> lowbit.testing.assert_bitexact(lowbit.convert(x, "e4m3", profile="cuda"),
        ...                                lowbit.convert(x, "e4m3", overflow="satfinite"))
    """
    name = None if fmt is None else format_name(fmt, "fmt")
    a, fa, shape_a = source(actual, "actual", name)
    e, fe, shape_e = source(expected, "expected", name)
    if fa != fe:
        raise AssertionError(f"actual holds {fa} codes, expected {fe} codes")
    if shape_a != shape_e:
        raise AssertionError(f"actual has shape {shape_a}, expected {shape_e}")
    if a.size == 0:
        raise AssertionError("nothing was compared: the arrays are empty")
    x = None
    if inputs is not None:
        x, fx, shape_x = source(inputs, "inputs")
        if shape_x != shape_e:
            raise ValueError(f"inputs: shape {shape_x} is not the arrays' shape {shape_e}")
    bad = np.flatnonzero(a != e)
    if bad.size == 0:
        return
    lines = [f"{bad.size} of {a.size} elements differ ({fe}); the first {min(bad.size, max_report)}:"]
    for i in bad[:max_report]:
        index = np.unravel_index(int(i), shape_e) if shape_e else ()
        text = f"  [{', '.join(str(int(k)) for k in index)}]:"
        if x is not None:
            text += f" input {_code_and_value(fx, int(x[i]))}"
        text += f" expected {_code_and_value(fe, int(e[i]))}, actual {_code_and_value(fe, int(a[i]))}"
        lines.append(text)
    raise AssertionError("\n".join(lines))


# ---- the gate ----------------------------------------------------------------------------------------


class GateFailure(AssertionError):
    """Raised by gate() when the run fails; `.result` is the GateResult, the message its report."""

    def __init__(self, result: "GateResult"):
        super().__init__(str(result).rstrip("\n"))
        self.result = result


class GateResult:
    """The outcome of gate(): per-suite counts, the report ``lowbit gate`` prints, JUnit and JSON.

    ``passed`` is the verdict (every compared case matched, no unit in error, at least `min_cases` cases
    compared, each `require`d suite compared one); ``returncode`` is ``lowbit gate``'s exit status for it (0
    or 1); ``failures`` the verdict's reasons; ``suites`` one dict per suite (name, cases, mismatches,
    errors, skipped, compared, units); ``str(result)`` the text report.
    """

    def __init__(self, reports: Any, max_report: int):
        self._reports = reports
        self._max_report = max_report
        self.subject: str = reports.subject
        self.suites: list = reports.suites()
        self.failures: list = list(reports.verdict())
        self.passed: bool = not self.failures
        self.returncode: int = 0 if self.passed else 1

    @property
    def cases(self) -> int:
        """Cases compared over all suites."""
        return sum(s["cases"] for s in self.suites)

    def __str__(self) -> str:
        return f"subject: {self.subject} (Python, in process)\n" + self._reports.text(self._max_report)

    def __repr__(self) -> str:
        return (f"<GateResult {self.subject!r}: {'passed' if self.passed else 'FAILED'}, {self.cases} cases in "
                f"{len(self.suites)} suites>")

    def junit(self) -> str:
        """The JUnit XML ``lowbit gate --junit`` writes: one testsuite per suite, one testcase per unit."""
        return self._reports.junit("lowbit gate")

    def json(self) -> dict:
        """The JSON report of vectors/SPEC.md (``lowbit gate --json``), as a dict."""
        import json as _json
        return _json.loads(self._reports.json(self._max_report))

    def write_junit(self, path: Any) -> None:
        """Write junit() to `path`."""
        _write_text(path, self._reports.junit("lowbit gate"))

    def write_json(self, path: Any) -> None:
        """Write the JSON report to `path`."""
        _write_text(path, self._reports.json(self._max_report))

    def check(self) -> "GateResult":
        """Raise GateFailure (an AssertionError whose message is the report) unless the run passed."""
        if not self.passed:
            raise GateFailure(self)
        return self


def _write_text(path: Any, text: str) -> None:
    """Write a report file whole: into a temporary file beside it, renamed into place."""
    import os
    import tempfile
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".lowbit-report-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _suite_names(suites: Any) -> list:
    from . import vectors
    if suites is None:
        return [s.name for s in vectors.suites() if s.committed]
    if isinstance(suites, str):
        suites = [suites]
    names = list(suites)
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"suites: expected suite names (str), not {type(n).__name__}")
    if not names:
        raise ValueError("suites: empty; name at least one suite (lowbit.vectors.suites())")
    return names


def gate(subject: Any, suites: Any = None, *, require: Any = (), min_cases: int = 1, seed: int = 1,
         max_report: int = 10, junit: Any = None, json: Any = None, check: bool = True, shape: Any = None,
         layout: Any = None) -> GateResult:
    """Run golden suites through a Python subject and compare its results bit for bit, as ``lowbit gate``.

    `subject` is any object with some of these methods (the plugin ABI of include/lowbit/plugin.h in Python);
    a missing one skips the suites that need it, a method returning None declines that file or case
    (skipped, with the reason), and one that raises fails it (an error, with the message):

    - ``convert(batch, recipe)``: `batch` a 1-D array of codes of ``recipe["from"]`` (in its dtype, or
      lowbit.Codes); `recipe` holds from, to, profile, rounding, overflow, subnormals, tininess.  Returns
      the codes of ``recipe["to"]``, or ``(codes, flags)`` with flags as uint8 masks (then compared too).
    - ``quantize(x, recipe, **inputs)``: `x` f32 [rows, cols]; `recipe` the case's recipe object
      (vectors/SPEC.md); further inputs (rbits, history_in, scale_in) by keyword where the case has them (a
      method without that keyword declines those cases).  Returns a dict or an object (lowbit.Quantized
      does) with codes, scales and, where the scheme has them, tensor_scale, history_out, scale_out.
    - ``gemm(a, b, recipe, **inputs)``: `a` [M, K] and `b` [K, N] codes; c, a_scales, b_scales by keyword
      where the case has them.  Returns D (f32 [M, N]) or a dict with "d".
    - ``contract(request, **inputs)`` (the ``contract-*`` suites, docs/contract.md): `request` holds the
      contract's document ("contract"), the pass ("pass") and, for a stochastic pass, "sr_seed"; the inputs
      x, w, dy, bias, residual by keyword where the pass reads them.  Returns a dict of stages keyed as
      ``lowbit contract run``'s files without ".npy" ("output", "accumulator", "x.quantized.codes", ...), or
      a lowbit.contract.Run: "output" is required, every other stage is compared where it is given.

    `suites`: a suite name or names (lowbit.vectors.suites(); default every committed suite), generated at
    `seed` in memory.  The run fails when a compared case mismatches, a unit is in error, fewer than
    `min_cases` cases are compared, or a suite matching a `require` glob compares none (a glob matching no
    suite of the run is a ValueError).  The subject runs in this process, with the interpreter's lock held;
    the worker-process isolation of ``lowbit gate --plugin`` is for shared libraries.

    `shape` / `layout`: the named suites at the kernel's own shapes, as ``lowbit gate --shape --layout``
    makes them (lowbit.vectors.generate says how they are spelt); the GEMM layout reaches the subject as
    the recipe's "layout" and the arrays' shapes.

    `junit` / `json`: files to write the JUnit XML and the JSON report to (before any failure is raised).
    With `check` (the default) a failing run raises GateFailure, an AssertionError whose message is the
    report; otherwise the GateResult is returned either way.

    Example:
        >>> import lowbit, ml_dtypes
        >>> class Widen:  # ml_dtypes' e2m1 -> bf16 cast, checked against the ocp profile's files
        ...     def convert(self, batch, recipe):
        ...         if (recipe["from"], recipe["to"], recipe["subnormals"]) != ("e2m1", "bf16", "keep"):
        ...             return None
        ...         return batch.astype(ml_dtypes.bfloat16)
        >>> result = lowbit.testing.gate(Widen(), "convert-ocp", require=["convert-ocp"])
        >>> result.passed, result.cases
        (True, 48)
    """
    from . import _lowbit
    from ._gate import Adapter
    names = _suite_names(suites)
    if isinstance(require, str):
        require = [require]
    require = list(require)
    for r in require:
        if not isinstance(r, str):
            raise TypeError(f"require: expected suite-name globs (str), not {type(r).__name__}")
    for arg, value in (("min_cases", min_cases), ("seed", seed), ("max_report", max_report)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{arg}: {value!r} is not a non-negative integer")
    if min_cases < 1:
        raise ValueError(f"min_cases: {min_cases!r} must be at least 1 (a gate that compares nothing shows nothing)")
    adapter = Adapter(subject)
    if not adapter.entries:
        raise TypeError(f"subject: {type(subject).__name__} has none of convert, quantize, gemm")
    name = getattr(subject, "name", None) or type(subject).__name__
    from .vectors import _shape_options
    shape, layout = _shape_options(shape, layout)
    if (shape is not None or layout is not None) and suites is None:
        raise ValueError("shape: name the suites to make at these shapes (suites=...)")
    reports = _lowbit.run_gate(str(name), adapter, adapter.entries, names, int(seed), require, int(min_cases),
                               int(max_report), shape, layout)
    result = GateResult(reports, int(max_report))
    if junit is not None:
        result.write_junit(junit)
    if json is not None:
        result.write_json(json)
    if check:
        result.check()
    return result


# ---- one pytest test per suite -------------------------------------------------------------------------

# Cases compared by the gate_tests() tests of this process (the pytest plugin fails a run that compared none).
_session = {"tests": 0, "cases": 0}


def gate_tests(subject: Any, suites: Any, *, require: Any = (), **options: Any):
    """A pytest test function that gates `subject` on each suite of `suites`: one test per suite.

    Assign it to a name starting with ``test_`` in a test module.  A suite with a mismatch or a unit in error
    fails its test with the gate's report; a suite that compared nothing fails when it matches a `require`
    glob and is skipped with the gate's skip reasons otherwise.  With the package's pytest plugin (installed
    with the package: the ``pytest11`` entry point ``lowbit``), a run whose gate tests compared no case at
    all fails.  `options` go to gate() (seed, max_report, ...).

    Example (in a test file)::

        test_nvfp4 = lowbit.testing.gate_tests(MyQuantizer(), ["scheme-nvfp4"], require=["scheme-nvfp4"])
    """
    import fnmatch

    import pytest

    names = _suite_names(suites)
    require = [require] if isinstance(require, str) else list(require)
    for r in require:
        if not any(fnmatch.fnmatchcase(n, r) for n in names):
            raise ValueError(f"require: '{r}' matches no suite of this run")
    for key in ("check", "min_cases", "junit", "json"):
        if key in options:
            raise TypeError(f"gate_tests: {key}= is set per suite by the tests themselves")

    @pytest.mark.parametrize("suite", names)
    def test_gate(suite: str) -> None:
        result = gate(subject, suite, check=False, **options)
        _session["tests"] += 1
        _session["cases"] += result.cases
        (report,) = result.suites
        if report["mismatches"] or report["errors"]:
            pytest.fail(str(result), pytrace=False)
        if report["cases"] == 0:
            if any(fnmatch.fnmatchcase(suite, r) for r in require):
                pytest.fail(f"{suite} is required and compared nothing\n{result}", pytrace=False)
            reasons = sorted({u["skip_reason"] for u in report["units"] if u["skipped"]})
            pytest.skip(f"{suite}: nothing compared ({'; '.join(reasons[:3]) or 'no units'})")

    return test_gate
