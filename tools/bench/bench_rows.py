"""Benchmark rows from Python, in the JSON shape Google Benchmark writes, for tools/bench/run.sh.

A rows script (tools/bench/*_rows.py) is run as

    python3 tools/bench/NAME_rows.py --repetitions N --out FILE.json

and writes every row it measures to FILE.json: the median of N repetitions, each repetition the mean time per
call over calls adding up to at least --min-time seconds (one call at least), as Google Benchmark's
--benchmark_repetitions=N --benchmark_report_aggregates_only=true gives it.  A row that cannot run (a package
missing) is written with its reason and shows as "-" in the tables.  run.sh puts rows named like the C++
benchmarks' into the same tables: BM_Convert/<target>/<impl>[/threads:<t>] become columns of the conversion
table (items per second), BM_Gemm/<impl>/n:<n>/threads:<t> cells of the GEMM table.

    rows = Rows("peer_rows", args)
    rows.measure("BM_Convert/e4m3/ml_dtypes", lambda: x.astype(ml_dtypes.float8_e4m3fn), items=x.size)
    rows.skip("BM_Convert/e4m3/torch", "torch is not installed")
    rows.write()
"""

import argparse
import json
import platform
import statistics
import time


def arguments(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--repetitions", type=int, default=3, help="repetitions of each row (the median is kept)")
    p.add_argument("--min-time", type=float, default=0.5, help="seconds of calls per repetition, at least")
    p.add_argument("--out", required=True, help="the JSON file to write")
    p.add_argument("--filter", default="", help="only rows whose name contains this")
    return p.parse_args()


class Rows:
    def __init__(self, source, args):
        self.args = args
        self.rows = []
        self.context = {"source": source, "python": platform.python_version()}

    def note(self, key, value):
        """A line of the JSON context (a package's version, its build, the thread setting)."""
        self.context[key] = value

    def wanted(self, name):
        return self.args.filter in name

    def measure(self, name, fn, items, threads=1):
        if not self.wanted(name):
            return
        fn()  # once before timing: first-call setup, page faults of the output
        times = []
        for _ in range(self.args.repetitions):
            calls, start = 0, time.perf_counter()
            while True:
                fn()
                calls += 1
                elapsed = time.perf_counter() - start
                if elapsed >= self.args.min_time:
                    break
            times.append(elapsed / calls)
        t = statistics.median(times)
        self.rows.append({"name": name + "_median", "run_name": name, "run_type": "aggregate",
                          "aggregate_name": "median", "repetitions": self.args.repetitions, "real_time": t * 1e3,
                          "cpu_time": t * 1e3, "time_unit": "ms", "items_per_second": items / t, "threads": threads})

    def skip(self, name, reason):
        if not self.wanted(name):
            return
        self.rows.append({"name": name, "run_name": name, "run_type": "aggregate", "aggregate_name": "median",
                          "error_occurred": True, "error_message": reason})

    def write(self):
        with open(self.args.out, "w") as f:
            json.dump({"context": self.context, "benchmarks": self.rows}, f, indent=1)
