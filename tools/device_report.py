#!/usr/bin/env python3
"""Merge one tools/device-check run into a single JSON file and print the short table last.

usage: device_report.py RAW_DIR OUT_JSON ELAPSED_SECONDS
       device_report.py --shard I/N --version V --bin DIR --started T --per-gpu 0|1 --tests "A B"
                        --benches "C D" OUT_DIR ELAPSED_SECONDS GPU_RAW_DIR...

RAW_DIR holds what device-check collected: nvidia-smi.csv, exit-codes.txt ("binary rc seconds" per
line), <test>.json (GoogleTest's --gtest_output=json; RecordProperty values are extra keys of each
test object), <bench>.json (each benchmark's own --json output) and missing.txt.
The second form writes one fleet task's result for `lowbit merge` (conformance/checks/shard.hpp):
OUT_DIR/shard.json and OUT_DIR/shard.json.sha256, with one entry per GPU_RAW_DIR (each also holding
`slot`, the GPU's 1-based place in the task, and `visible`, the CUDA_VISIBLE_DEVICES it ran under).
The build id is the SHA-256 of the list of the binaries' own SHA-256 digests, so that tasks agree
only when they ran the same binaries.
Standard library only: the GPU machine has a plain python3.
"""
import argparse
import csv
import datetime
import hashlib
import json
import os
import socket
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


def read_gpu(raw):
    """One GPU's results: the nvidia-smi row, the binaries' exit codes, the tests and the benchmarks."""
    out = {"gpu": {}, "binaries": {}, "tests": [], "benchmarks": {}, "missing": []}
    smi = os.path.join(raw, "nvidia-smi.csv")
    if os.path.exists(smi):
        rows = list(csv.reader(open(smi), skipinitialspace=True))
        if len(rows) >= 2:
            out["gpu"] = {k.strip(): v.strip() for k, v in zip(rows[0], rows[1])}
    codes = os.path.join(raw, "exit-codes.txt")
    if os.path.exists(codes):
        for line in open(codes):
            name, rc, secs = line.split()
            out["binaries"][name] = {"exit": int(rc), "seconds": int(secs)}
    missing = os.path.join(raw, "missing.txt")
    if os.path.exists(missing):
        out["missing"] = [l.strip() for l in open(missing) if l.strip()]
    for name in sorted(out["binaries"]):
        path = os.path.join(raw, name + ".json")
        if not os.path.exists(path):
            out["binaries"][name]["note"] = "no JSON written (crashed, timed out or skipped)"
            continue
        try:
            if name.endswith("_test"):
                out["tests"].extend(read_tests(path, name))
            else:
                with open(path) as f:
                    out["benchmarks"][name] = json.load(f)
        except (ValueError, OSError) as e:
            out["binaries"][name]["note"] = "unreadable JSON: %s" % e
    return out


def build_id(bin_dir, names):
    """SHA-256 over "<sha256>  <name>" lines of every binary present, in name order."""
    lines = []
    for name in sorted(names):
        path = os.path.join(bin_dir, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                lines.append("%s  %s\n" % (hashlib.sha256(f.read()).hexdigest(), name))
    return "sha256:" + hashlib.sha256("".join(lines).encode()).hexdigest()


def write_atomically(path, text):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def shard_main(argv):
    ap = argparse.ArgumentParser(prog="device_report.py --shard")
    ap.add_argument("--shard", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--started", required=True)
    ap.add_argument("--per-gpu", type=int, choices=(0, 1), required=True)
    ap.add_argument("--tests", required=True)
    ap.add_argument("--benches", required=True)
    ap.add_argument("out")
    ap.add_argument("elapsed", type=int)
    ap.add_argument("gpus", nargs="+")
    a = ap.parse_args(argv)
    index, count = (int(x) for x in a.shard.split("/"))
    tests, benches = a.tests.split(), a.benches.split()
    gpus = []
    for raw in a.gpus:
        r = read_gpu(raw)
        g = r["gpu"]
        entry = {"slot": int(open(os.path.join(raw, "slot")).read()),
                 "index": g.get("index", ""), "uuid": g.get("uuid", ""), "name": g.get("name", ""),
                 "driver_version": g.get("driver_version", ""),
                 "visible": open(os.path.join(raw, "visible")).read().strip(), "nvidia_smi": g}
        entry.update({k: r[k] for k in ("binaries", "tests", "benchmarks", "missing")})
        gpus.append(entry)
    # The header of conformance/checks/shard.hpp: the space is the run's tasks, of which this is one.
    doc = {"schema": "lowbit-shard/1", "kind": "device", "shard": {"index": index, "count": count},
           "lowbit_version": a.version, "build_id": build_id(a.bin, tests + benches),
           "options": {"tests": tests, "benches": benches, "per_gpu": bool(a.per_gpu)},
           "space": [{"name": "tasks", "inputs": count, "begin": index - 1, "end": index}],
           "run": {"started": a.started, "seconds": a.elapsed, "host": socket.gethostname()},
           "gpus": gpus}
    text = json.dumps(doc, indent=1) + "\n"
    write_atomically(os.path.join(a.out, "shard.json"), text)
    write_atomically(os.path.join(a.out, "shard.json.sha256"),
                     hashlib.sha256(text.encode()).hexdigest() + "  shard.json\n")

    print()
    print("%-5s %-42s %-24s %-10s %5s %5s %5s" % ("slot", "uuid", "gpu", "driver", "pass", "fail", "skip"))
    for g in gpus:
        count_of = lambda r: sum(1 for t in g["tests"] if t["result"] == r)
        print("%-5d %-42s %-24s %-10s %5d %5d %5d" % (g["slot"], g["uuid"], g["name"][:24], g["driver_version"],
                                                     count_of("passed"), count_of("failed"), count_of("skipped")))
    print("shard %d/%d: %d GPU(s), %d s; result %s (join the tasks with lowbit merge)"
          % (index, count, len(gpus), a.elapsed, os.path.join(a.out, "shard.json")))
    failed = any(t["result"] == "failed" for g in gpus for t in g["tests"]) or \
        any(b["exit"] != 0 for g in gpus for b in g["binaries"].values())
    return 1 if failed else 0


def main():
    if len(sys.argv) > 1 and sys.argv[1].startswith("--shard"):
        return shard_main(sys.argv[1:])
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
