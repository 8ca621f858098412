#!/usr/bin/env python3
"""Merge one tools/device-check run into a single JSON file and print the short table last.

usage: device_report.py RAW_DIR OUT_JSON ELAPSED_SECONDS

RAW_DIR holds what device-check collected: nvidia-smi.csv, exit-codes.txt ("binary rc seconds" per
line), <test>.json (GoogleTest's --gtest_output=json; RecordProperty values are extra keys of each
test object), <bench>.json (each benchmark's own --json output) and missing.txt.
Standard library only: the GPU machine has a plain python3.
"""
import csv
import datetime
import json
import os
import sys

GTEST_KEYS = {"name", "file", "line", "status", "result", "timestamp", "time", "classname", "failures",
              "value_param", "type_param"}


def read_tests(path, binary):
    with open(path) as f:
        doc = json.load(f)
    out = []
    for suite in doc.get("testsuites", []):
        for t in suite.get("testsuite", []):
            failures = [x.get("failure", "")[:2000] for x in t.get("failures", [])]
            if failures:
                result = "failed"
            elif t.get("result") == "SKIPPED":
                result = "skipped"
            else:
                result = "passed"
            props = {k: v for k, v in t.items() if k not in GTEST_KEYS}
            out.append({"binary": binary, "suite": suite.get("name"), "name": t.get("name"), "result": result,
                        "seconds": t.get("time"), "failures": failures[:5], "properties": props})
    return out


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    raw, out_path, elapsed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    report = {"schema": "lowbit-device-check/1",
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "elapsed_seconds": elapsed, "gpu": {}, "binaries": {}, "tests": [], "benchmarks": {}, "missing": []}
    smi = os.path.join(raw, "nvidia-smi.csv")
    if os.path.exists(smi):
        rows = list(csv.reader(open(smi)))
        if len(rows) >= 2:
            report["gpu"] = {k.strip(): v.strip() for k, v in zip(rows[0], rows[1])}
    codes = os.path.join(raw, "exit-codes.txt")
    if os.path.exists(codes):
        for line in open(codes):
            name, rc, secs = line.split()
            report["binaries"][name] = {"exit": int(rc), "seconds": int(secs)}
    missing = os.path.join(raw, "missing.txt")
    if os.path.exists(missing):
        report["missing"] = [l.strip() for l in open(missing) if l.strip()]
    for name in sorted(report["binaries"]):
        path = os.path.join(raw, name + ".json")
        if not os.path.exists(path):
            report["binaries"][name]["note"] = "no JSON written (crashed, timed out or skipped)"
            continue
        try:
            if name.endswith("_test"):
                report["tests"].extend(read_tests(path, name))
            else:
                with open(path) as f:
                    report["benchmarks"][name] = json.load(f)
        except (ValueError, OSError) as e:
            report["binaries"][name]["note"] = "unreadable JSON: %s" % e
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, out_path)

    # The short table, last.
    print()
    print("%-34s %6s %6s %6s %6s %6s" % ("binary", "exit", "secs", "pass", "fail", "skip"))
    for name, b in sorted(report["binaries"].items()):
        ts = [t for t in report["tests"] if t["binary"] == name]
        count = lambda r: sum(1 for t in ts if t["result"] == r)
        print("%-34s %6d %6d %6s %6s %6s" % (name, b["exit"], b["seconds"],
                                              count("passed") if ts else "-", count("failed") if ts else "-",
                                              count("skipped") if ts else "-"))
    for t in report["tests"]:
        if t["result"] == "failed":
            first = t["failures"][0].splitlines()[0:3] if t["failures"] else []
            print("FAILED %s %s.%s: %s" % (t["binary"], t["suite"], t["name"], " | ".join(first)[:300]))
    for name, b in sorted(report["benchmarks"].items()):
        print("%s: %s" % (name, json.dumps(b, sort_keys=True)[:600]))
    print("gpu: %s; %d s in all; report %s" % (report["gpu"].get("name", "?"), elapsed, out_path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
