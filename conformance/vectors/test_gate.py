"""A gate a kernel team can trust (issue 17; vectors/SPEC.md sections 7, 8 and 10).

Nothing compared is a failure (exit 1, the reason named); --require and --min-cases; damaged suites
(no cases or files, unknown kind or role, a duplicated case index) are exit 2; missing, truncated and
malformed results and subject failures are errors, counted apart from mismatches in the text, JUnit and
JSON reports; --max-report bounds every listing; and the plugin runs in a child process: the misbehaving
plugin (misbehaving_plugin.cpp, which forwards to the planted-bug plugin) crashes, aborts, throws,
overruns its output, hangs, exits, returns garbage, prints or closes stdout in one named unit, and that unit
alone is in error while the rest of the run goes on.

Expected counts come from the golden manifests and files themselves (lines of the scalar files, elements
of the expected arrays), never from lowbit's report of them.
"""
import hashlib
import json
import math
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

LOWBIT = os.environ.get("LOWBIT", "lowbit")
GOLDEN = Path(os.environ.get("LOWBIT_GOLDEN", Path(__file__).resolve().parents[2] / "vectors" / "golden"))
PLANTED = os.environ.get("LOWBIT_PLANTED_PLUGIN")
MISBEHAVING = os.environ.get("LOWBIT_MISBEHAVING_PLUGIN")

needs_plugins = pytest.mark.skipif(not (PLANTED and MISBEHAVING),
                                   reason="LOWBIT_PLANTED_PLUGIN / LOWBIT_MISBEHAVING_PLUGIN not set (built with the tests)")


def run(*args, misbehave=None, timeout=120):
    env = dict(os.environ)
    env.pop("LOWBIT_MISBEHAVE", None)
    if misbehave:
        env["LOWBIT_MISBEHAVE"] = misbehave
    p = subprocess.run([LOWBIT, *map(str, args)], capture_output=True, text=True, check=False, env=env,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def manifest(suite):
    return json.loads((GOLDEN / suite / "manifest.json").read_text())


def scalar_cases(suite, path):
    return sum(1 for l in (GOLDEN / suite / path).read_text().splitlines() if l and not l.startswith("#"))


def junit(path):
    root = ET.parse(path).getroot()
    return root, {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}


def summary(out, suite):
    return next(l for l in out.splitlines() if l.startswith(suite + ": "))


# The one unit each misbehaviour hits (misbehaving_plugin.cpp): convert f16 -> e5m2 is one file of
# convert-te; quantize of element e5m2 on a 1x16 input is one case of scheme-tensor.
CONVERT_UNIT = "e5m2/rne-satfinite-keep-after/f16.txt"
TENSOR_CASE = next(c for c in manifest("scheme-tensor")["cases"] if c["name"] == "e5m2/random-1x16")
TENSOR_UNIT = "case-%03d %s" % (TENSOR_CASE["index"], TENSOR_CASE["name"])

CAUSES = {
    "segv": "crashed during {call}: killed by signal 11 (SIGSEGV",
    "abort": "crashed during {call}: killed by signal 6 (SIGABRT",
    "throw": "threw a C++ exception during {call}: thrown by the misbehaving plugin",
    "overrun": "crashed during {call}: killed by signal 11 (SIGSEGV",  # the guard page after the output
    "hang": "hung during {call}: no return within 1 s (--timeout), killed",
    "exit": "exited during {call} with status 0 before returning",
    "garbage": "returned 7, not a status of plugin.h",
}


@needs_plugins
@pytest.mark.parametrize("where", ["convert", "quantize"])
@pytest.mark.parametrize("what", sorted(CAUSES))
def test_a_misbehaving_call_is_an_error_of_its_unit_and_the_rest_still_runs(tmp_path, what, where):
    bad_suite, other = ("convert-te", "scheme-tensor") if where == "convert" else ("scheme-tensor", "convert-te")
    unit = CONVERT_UNIT if where == "convert" else TENSOR_UNIT
    call = "convert(f16 -> e5m2)" if where == "convert" else "quantize"
    xml, js = tmp_path / "g.xml", tmp_path / "g.json"
    rc, out, err = run("gate", "--plugin", MISBEHAVING, "--suite", "convert-te", "--suite", "scheme-tensor",
                       "--timeout", "1", "--junit", xml, "--json", js, misbehave=f"{what}:{where}")
    assert rc == 1, out + err
    # The unit's error names the suite, the unit (the batch) and what happened.
    line = next(l for l in out.splitlines() if l.startswith(f"  {bad_suite} {unit}: "))
    assert CAUSES[what].format(call=call) in line, line
    assert " 1 in error  FAILED" in summary(out, bad_suite)
    units = len(manifest(bad_suite)["files" if where == "convert" else "cases"])
    assert f"in {units - 1} of {units} units" in summary(out, bad_suite)
    # The other suite ran in full: convert-te has the planted plugin's e4m3 mismatches, scheme-tensor none.
    other_units = len(manifest(other)["files" if other == "convert-te" else "cases"])
    assert f"in {other_units} of {other_units} units" in summary(out, other) and "0 in error" in summary(out, other)
    # JUnit: an <error> on that unit alone.
    root, cases = junit(xml)
    errors = [k for k, c in cases.items() if c.find("error") is not None]
    assert errors == [(bad_suite, unit)] and root.get("errors") == "1"
    # JSON: the same, counted apart from mismatches.
    j = json.loads(js.read_text())
    s = next(s for s in j["suites"] if s["suite"] == bad_suite)
    assert j["passed"] is False and s["units_in_error"] == 1 and [e["unit"] for e in s["errors"]] == [unit]
    assert j["totals"]["units_in_error"] == 1


@needs_plugins
@pytest.mark.parametrize("misbehave", ["exit:ctor", "exit:entry", "segv:entry", "hang:ctor"])
def test_misbehaving_while_loading_fails_every_unit(tmp_path, misbehave):
    xml = tmp_path / "g.xml"
    rc, out, err = run("gate", "--plugin", MISBEHAVING, "--suite", "scheme-tensor", "--timeout", "1", "--junit", xml,
                       misbehave=misbehave)
    assert rc == 1, out + err
    n = len(manifest("scheme-tensor")["cases"])
    assert f"0 cases compared in 0 of {n} units, 0 mismatching, 0 skipped, {n} in error  FAILED" in out
    assert "while loading (in a library constructor or lowbit_plugin_entry)" in out
    assert "why: nothing was compared" in out
    root, _ = junit(xml)
    assert root.get("errors") == str(n) and root.get("failures") == "0"


BROKEN_TABLES = [
    ("short", "struct_size 16 bytes; ABI version 1 needs"),
    ("badabi", "speaks plugin ABI version 99"),
    ("badptr", "convert pointer 0x10 lies in no loaded library"),
    ("badname", "name pointer cannot be read: killed by signal 11 (SIGSEGV"),
]


# In process, an unreadable name pointer would crash the gate itself (that mode is for a debugger): the
# name is read in the worker only.
@needs_plugins
@pytest.mark.parametrize("misbehave, message, mode", [(m, t, []) for m, t in BROKEN_TABLES] +
                         [(m, t, ["--in-process"]) for m, t in BROKEN_TABLES if m != "badname"])
def test_a_broken_table_is_exit_2_and_writes_nothing(tmp_path, misbehave, message, mode):
    xml = tmp_path / "g.xml"
    rc, out, err = run("gate", "--plugin", MISBEHAVING, "--suite", "scheme-tensor", *mode, "--junit", xml,
                       misbehave=misbehave)
    assert rc == 2 and message in err and "--plugin" in err, out + err
    assert not xml.exists()


E4M3_RECIPE = json.dumps(manifest("scheme-tensor")["cases"][0]["recipe"], separators=(",", ":"), sort_keys=True)


@needs_plugins
@pytest.mark.parametrize("misbehave, reason", [
    ("decline", "the plugin's quantize declined recipe " + E4M3_RECIPE),
    ("null", "the plugin has no quantize entry point (NULL in its table)"),
])
def test_a_subject_that_runs_nothing_fails(tmp_path, misbehave, reason):
    xml, js = tmp_path / "g.xml", tmp_path / "g.json"
    rc, out, err = run("gate", "--plugin", MISBEHAVING, "--suite", "scheme-tensor", "--suite", "convert-te",
                       "--junit", xml, "--json", js, "--max-report", "2", misbehave=misbehave)
    assert rc == 1, out + err
    assert "why: nothing was compared: every unit of 2 suites was skipped or in error" in out
    assert out.splitlines()[-2].startswith("FAILED: 2 suites, 0 cases compared")
    # Skips are listed by suite and reason: the recipe declined (e4m3, e5m2, e4m3-pow2: 5 cases each) or
    # the NULL entry point (all 15 cases, and for convert-te all its files).
    e4m3 = [c["name"] for c in manifest("scheme-tensor")["cases"] if c["name"].startswith("e4m3/")]
    n = len(e4m3) if misbehave == "decline" else len(manifest("scheme-tensor")["cases"])
    assert f"  scheme-tensor: {reason} ({n} units: case-000 {e4m3[0]}, case-001 {e4m3[1]}, case-002 {e4m3[2]}, ...)" in out
    if misbehave == "decline":  # 3 recipes, and each file of convert-te its own conversion
        assert f"  (2 of {3 + len(manifest('convert-te')['files'])} skip reasons shown; --max-report N shows more)" in out
    else:  # one reason per suite
        assert "  convert-te: the plugin has no convert entry point (NULL in its table) (49 units: " in out
    root, _ = junit(xml)
    units = len(manifest("scheme-tensor")["cases"]) + len(manifest("convert-te")["files"])
    assert root.get("skipped") == str(units) and root.get("failures") == "0"
    j = json.loads(js.read_text())
    assert j["passed"] is False and j["totals"]["cases_compared"] == 0 and j["totals"]["units_skipped"] == units
    assert j["suites"][0]["skipped"][0] == {"unit": "case-000 e4m3/random-1x16", "reason": reason}


@needs_plugins
def test_plugin_output_is_kept_apart_from_the_report():
    """The noisy plugin prints "all match" on stdout and a line on stderr at every call; the report is the
    planted plugin's, line for line, and the noise shows on stderr only."""
    args = ["--suite", "scheme-tensor", "--suite", "convert-te"]
    rc_quiet, quiet, _ = run("gate", "--plugin", PLANTED, *args)
    rc, out, err = run("gate", "--plugin", MISBEHAVING, *args, misbehave="noise")
    assert rc == rc_quiet == 1  # the planted e4m3 ulp
    assert "PLUGIN NOISE" not in out and "PLUGIN NOISE on stdout" in err and "PLUGIN NOISE on stderr" in err
    assert out.splitlines()[1:] == quiet.splitlines()[1:]  # all but the plugin line, which names the plugin
    # A plugin that closes its stdout loses nothing of the report either.
    rc, out, err = run("gate", "--plugin", MISBEHAVING, *args, misbehave="closestdout")
    assert rc == 1 and out.splitlines()[1:] == quiet.splitlines()[1:], err


@needs_plugins
def test_in_process_gives_the_same_report(tmp_path):
    args = ["--plugin", PLANTED, "--suite", "scheme-mx", "--suite", "convert-te", "--suite", "gemm-exact"]
    rc1, out1, _ = run("gate", *args, "--json", tmp_path / "a.json", "--junit", tmp_path / "a.xml")
    rc2, out2, _ = run("gate", *args, "--in-process", "--json", tmp_path / "b.json", "--junit", tmp_path / "b.xml")
    assert rc1 == rc2 == 1 and out1 == out2
    assert (tmp_path / "a.json").read_text() == (tmp_path / "b.json").read_text()
    assert (tmp_path / "a.xml").read_text() == (tmp_path / "b.xml").read_text()


@needs_plugins
def test_require_and_min_cases():
    # convert-p3109 passes under the planted plugin; gemm-exact is declined in full.
    cases = sum(scalar_cases("convert-p3109", f["path"]) for f in manifest("convert-p3109")["files"])
    base = ["gate", "--plugin", PLANTED, "--suite", "convert-p3109", "--suite", "gemm-exact"]
    assert run(*base)[0] == 0
    rc, out, _ = run(*base, "--min-cases", cases)
    assert rc == 0, out
    rc, out, _ = run(*base, "--min-cases", cases + 1)
    assert rc == 1 and f"why: {cases} cases compared, fewer than --min-cases {cases + 1}" in out
    rc, _, err = run(*base, "--require", "gemm-exakt")
    assert rc == 2 and "--require: 'gemm-exakt' matches no suite" in err
    rc, _, err = run(*base, "--min-cases", "0")
    assert rc == 2 and "--min-cases" in err
    rc, out, _ = run(*base, "--require", "convert-*")
    assert rc == 0, out
    rc, out, _ = run(*base, "--require", "convert-*", "--require", "gemm-exact")
    assert rc == 1 and "why: required suite gemm-exact (--require gemm-exact) compared nothing: 34 units skipped" in out


@needs_plugins
def test_json_to_stdout_is_the_whole_stdout():
    rc, out, err = run("gate", "--plugin", PLANTED, "--suite", "gemm-f32-sequential", "--json", "-")
    assert rc == 0, err
    j = json.loads(out)
    n = len(manifest("gemm-f32-sequential")["cases"])
    elements = sum(math.prod(f["shape"]) for f in manifest("gemm-f32-sequential")["files"] if f["role"] == "expected")
    assert j["schema"] == 1 and j["command"] == "gate" and j["passed"] is True and j["failures"] == []
    assert j["subject"].startswith("planted-bug")
    s = j["suites"][0]
    assert (s["suite"], s["status"], s["units"], s["units_compared"], s["cases_compared"]) == (
        "gemm-f32-sequential", "ok", n, n, elements)
    assert s["errors"] == s["skipped"] == s["first_mismatches"] == []


# ---- check: damaged suites, errors apart from mismatches --------------------------------------------


def rewrite_manifest(folder, change):
    m = json.loads((folder / "manifest.json").read_text())
    change(m)
    text = json.dumps(m, indent=1, sort_keys=True, ensure_ascii=True) + "\n"
    (folder / "manifest.json").write_text(text)
    (folder / "manifest.json.sha256").write_text(hashlib.sha256(text.encode()).hexdigest() + "  manifest.json\n")


def set_key(key, value):
    return lambda m: m.__setitem__(key, value)


def first_file(key, value):
    return lambda m: m["files"][0].__setitem__(key, value)


def duplicate_index(m):
    m["cases"][1]["index"] = m["cases"][0]["index"]


@pytest.mark.parametrize("suite, change, message", [
    ("gemm-exact", set_key("cases", []), '"cases" is empty or missing'),
    ("gemm-exact", set_key("files", []), '"files" is empty'),
    ("convert-te", set_key("files", []), '"files" is empty'),
    ("gemm-exact", set_key("kind", "gemmm"), "unknown kind 'gemmm'"),
    ("gemm-exact", first_file("role", "inputs"), "unknown role 'inputs'"),
    ("convert-te", first_file("role", "input"), "of a convert suite has role 'input'"),
    ("gemm-exact", duplicate_index, "case index 0 is listed twice"),
])
def test_a_checksum_consistent_but_damaged_suite_is_exit_2(tmp_path, suite, change, message):
    golden = tmp_path / "g"
    shutil.copytree(GOLDEN / suite, golden)
    rewrite_manifest(golden, change)
    rc, out, err = run("check", "--vectors", golden, "--results", GOLDEN / suite)
    assert rc == 2 and "golden set damaged" in err and message in err, out + err


def test_truncated_and_malformed_results_are_errors_not_mismatches(tmp_path):
    golden = GOLDEN / "convert-te"
    results = tmp_path / "r"
    shutil.copytree(golden, results)
    paths = sorted(f["path"] for f in manifest("convert-te")["files"])
    truncated = next(p for p in paths if scalar_cases("convert-te", p) > 100)
    malformed, missing = [p for p in paths if p != truncated][:2]
    lines = (results / truncated).read_text().splitlines(keepends=True)
    (results / truncated).write_text("".join(lines[:103]))  # 3 header lines, 100 cases
    (results / malformed).write_text((results / malformed).read_text().replace("\n", " zz\n", 5))
    (results / missing).unlink()
    xml, js = tmp_path / "c.xml", tmp_path / "c.json"
    rc, out, _ = run("check", "--vectors", golden, "--results", results, "--junit", xml, "--json", js)
    assert rc == 1, out
    n = len(manifest("convert-te")["files"])
    assert summary(out, "convert-te").endswith(f" in {n - 3} of {n} units, 0 mismatching, 0 skipped, 3 in error  FAILED")
    want = scalar_cases("convert-te", truncated)
    assert f"convert-te {truncated}: results file {truncated} has 100 cases, the golden file {want}" in out
    assert f"convert-te {malformed}: results file {malformed}: line 4:" in out
    assert f"convert-te {missing}: results file " in out and "missing" in out
    root, cases = junit(xml)
    assert root.get("errors") == "3" and root.get("failures") == "0"
    assert cases[("convert-te", truncated)].find("error") is not None
    j = json.loads(js.read_text())
    assert j["totals"]["units_in_error"] == 3 and j["totals"]["mismatching_cases"] == 0
    compared = sum(scalar_cases("convert-te", f["path"]) for f in manifest("convert-te")["files"]) - want - \
        scalar_cases("convert-te", malformed) - scalar_cases("convert-te", missing)
    assert j["totals"]["cases_compared"] == compared


@pytest.mark.parametrize("only", ["[", "nothing-has-this-name"])
def test_check_that_selects_nothing_fails(only):
    rc, out, _ = run("check", "--vectors", GOLDEN / "convert-te", "--results", GOLDEN / "convert-te", "--only", only)
    assert rc == 1 and "why: nothing was compared" in out, out


def test_max_report_bounds_every_listing(tmp_path):
    results = tmp_path / "r"
    shutil.copytree(GOLDEN / "convert-te", results)
    paths = sorted(f["path"] for f in manifest("convert-te")["files"])
    for p in paths[:5]:
        (results / p).unlink()
    for p in paths[5:10]:  # one wrong result code in each: flip the low bit of the first case's result
        lines = (results / p).read_text().splitlines()
        f = lines[3].split()
        f[1] = "%0*x" % (len(f[1]), int(f[1], 16) ^ 1)
        lines[3] = " ".join(f)
        (results / p).write_text("\n".join(lines) + "\n")
    only = [a for p in paths[:10] for a in ("--only", p)]  # the other units are skipped
    rc, out, _ = run("check", "--vectors", GOLDEN / "convert-te", "--results", results, *only, "--max-report", "2")
    assert rc == 1
    sections, current = {}, None
    for line in out.splitlines():
        if line.endswith(":") and not line.startswith(" "):
            current = line[:-1]
            sections[current] = []
        elif line.startswith("  ") and current and not line.startswith("  why:"):
            sections[current].append(line)
    for name in ("errors", "mismatches"):
        shown = [l for l in sections[name] if not l.startswith("  (")]
        assert len(shown) == 2, (name, sections[name])
        assert sections[name][-1].startswith("  (2 of ") and "--max-report N shows more" in sections[name][-1]


# ---- shards --------------------------------------------------------------------------------------


@needs_plugins
def test_merged_gate_json_is_the_unsharded_json(tmp_path):
    suites = ["--suite", "convert-te", "--suite", "scheme-tensor"]
    common = ["gate", "--plugin", MISBEHAVING, *suites, "--timeout", "5", "--require", "scheme-*"]
    rc, _, err = run(*common, "--json", tmp_path / "whole.json", misbehave="segv:quantize")
    assert rc == 1, err
    dirs = []
    for i in (1, 2):
        d = tmp_path / f"s{i}"
        # Each shard's status judges its part (shard 2 holds no failing unit); the merge judges the whole.
        assert run(*common, "--shard", f"{i}/2", "--out", d, misbehave="segv:quantize")[0] in (0, 1)
        dirs.append(d)
    p = subprocess.run([LOWBIT, "merge", *map(str, dirs), "--out", str(tmp_path / "m")], capture_output=True,
                       text=True, check=False)
    assert p.returncode == 1, p.stderr
    assert (tmp_path / "m" / "gate.json").read_text() == (tmp_path / "whole.json").read_text()


@needs_plugins
def test_a_report_that_cannot_reach_stdout_is_exit_2():
    # The gate's own stdout closed; then, in process, a plugin that closes it (isolated, see above, nothing is lost).
    p = subprocess.run(["sh", "-c", 'exec "$0" "$@" >&-', LOWBIT, "gate", "--plugin", PLANTED, "--suite", "scheme-tensor"],
                       capture_output=True, text=True, check=False)
    assert p.returncode == 2 and "stdout: closed, the report would be lost" in p.stderr, p.stderr
    rc, _, err = run("gate", "--plugin", MISBEHAVING, "--suite", "scheme-tensor", "--in-process",
                     misbehave="closestdout")
    assert rc == 2 and "stdout: the report could not be written" in err, err
