#!/usr/bin/env python3
"""Render lowbit's accuracy report: DIR/report.json -> DIR/figures/*.png, DIR/report.md, DIR/index.html.

usage: render.py DIR/report.json

`lowbit report` computes report.json (every number) and runs this script; it can also be run by hand on
a report.json.  index.html is self-contained: the figures are embedded as data: URIs and the page has no
script, so it opens from disk or as a mail attachment.  report.md shows the same tables and links the
PNG files of figures/.  Figures are drawn with matplotlib (pinned in requirements.txt, installed by
scripts/setup.sh) on its non-interactive Agg backend; every file is written to a temporary name and
renamed into place.
"""
import base64
import html
import io
import json
import os
import sys

EXIT_NO_MATPLOTLIB = 3

# Configurations drawn in the histograms and the headline bar chart (a readable subset; the tables and
# the heat map show every one).
HIGHLIGHT = ["none/e4m3", "tensor/e4m3", "channel/e4m3", "block1x128/e4m3", "mx/e4m3", "tensor/e2m1",
             "mx/e2m1", "nvfp4/e2m1"]


def load_matplotlib():
    try:
        import matplotlib
    except ImportError:
        sys.stderr.write(
            "render.py: matplotlib is not installed for %s.\n"
            "  It is pinned in requirements.txt and scripts/setup.sh installs it; by hand:\n"
            "    %s -m pip install -r requirements.txt\n"
            "  (or run `lowbit report --json-only` for report.json alone)\n" % (sys.executable, sys.executable))
        sys.exit(EXIT_NO_MATPLOTLIB)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "figure.dpi": 100, "savefig.dpi": 100,
                         "axes.grid": True, "grid.alpha": 0.3, "svg.hashsalt": "lowbit"})
    return plt


def write_atomically(path, data):
    tmp = os.path.join(os.path.dirname(path) or ".", ".%s.tmp.%d" % (os.path.basename(path), os.getpid()))
    with open(tmp, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))
    os.replace(tmp, path)


def png_bytes(plt, fig):
    buf = io.BytesIO()
    # No "Software" key: the bytes depend on the pinned matplotlib alone, not on a version string.
    fig.savefig(buf, format="png", bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def fmt(x, digits=3):
    if x is None:
        return "-"
    if isinstance(x, int):
        return str(x)
    if x == 0:
        return "0"
    a = abs(x)
    if 1e-3 <= a < 1e5:
        return ("%." + str(digits) + "g") % x
    return ("%." + str(digits - 1) + "e") % x


def pct(x):
    if x is None:
        return "-"
    if x == 0:
        return "0"
    return "%.3g%%" % (100 * x)


# ---- figures ------------------------------------------------------------------------------------------

def figure_gemm(plt, report):
    rows = report["gemm_error_vs_k"]
    if not rows:
        return None
    models = []
    for r in rows:
        if r["model"] not in models:
            models.append(r["model"])
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    cmap = plt.get_cmap("tab20")
    markers = "os^vD<>phX*"
    for i, m in enumerate(models):
        pts = [r for r in rows if r["model"] == m]
        ks = [r["k"] for r in pts]
        style = dict(color=cmap(i % 20), marker=markers[i % len(markers)], markersize=4, linewidth=1.2,
                     label=m)
        # The two models the experiment is about stand out, drawn last (on top).
        if m == "hopper-fp8":
            style.update(color="black", linewidth=2.6, markersize=6, zorder=4)
        elif m == "hopper-fp8-promote128":
            style.update(color="crimson", linewidth=2.6, markersize=6, zorder=4)
        for ax, key in zip(axes, ("norm_rel_error", "max_rel_error")):
            # Zero errors cannot sit on a log axis: they are left out of the line (the tables show them).
            xs = [k for k, r in zip(ks, pts) if r[key] and r[key] > 0]
            ys = [r[key] for r in pts if r[key] and r[key] > 0]
            if xs:
                ax.plot(xs, ys, **style)
    for ax, title in zip(axes, ("norm-wise relative error ||D - D_exact|| / ||D_exact||",
                                "largest element-wise relative error")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("K")
        ax.set_title(title)
    e = report["gemm_experiment"]
    fig.suptitle("GEMM error against the exact reference as K grows (M = N = %d, seed %d, e4m3 inputs)"
                 % (e["m"], e["seed"]))
    axes[1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def figure_sqnr_heatmap(plt, report):
    if not report["quantization"]:
        return None
    dists = [d["name"] for d in report["distributions"]]
    configs = [c["name"] for c in report["configs"]]
    q = {(r["distribution"], r["config"]): r for r in report["quantization"]}
    data = [[q[(d, c)]["sqnr_db"] if q[(d, c)]["sqnr_db"] is not None else float("nan") for d in dists]
            for c in configs]
    fig, ax = plt.subplots(figsize=(8.5, 0.3 * len(configs) + 1.6))
    im = ax.imshow(data, aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(dists)), dists, rotation=20, ha="right")
    ax.set_yticks(range(len(configs)), configs)
    ax.grid(False)
    finite = [v for row in data for v in row if v == v]
    mid = (max(finite) + min(finite)) / 2 if finite else 0
    for i, row in enumerate(data):
        for j, v in enumerate(row):
            if v == v:
                ax.text(j, i, "%.1f" % v, ha="center", va="center", fontsize=7,
                        color="black" if v > mid else "white")
    fig.colorbar(im, ax=ax, label="SQNR (dB)", fraction=0.04)
    ax.set_title("SQNR (dB) by element format x scaling scheme and distribution (higher is better)")
    fig.tight_layout()
    return fig


def figure_sqnr_bars(plt, report):
    if not report["quantization"]:
        return None
    dists = [d["name"] for d in report["distributions"]]
    q = {(r["distribution"], r["config"]): r for r in report["quantization"]}
    configs = [c for c in HIGHLIGHT if (dists[0], c) in q]
    fig, ax = plt.subplots(figsize=(11, 4.2))
    width = 0.8 / len(configs)
    cmap = plt.get_cmap("tab10")
    for i, c in enumerate(configs):
        ys = [q[(d, c)]["sqnr_db"] or 0 for d in dists]
        ax.bar([j + (i - (len(configs) - 1) / 2) * width for j in range(len(dists))], ys, width, label=c,
               color=cmap(i % 10))
    ax.set_xticks(range(len(dists)), dists)
    ax.set_ylabel("SQNR (dB)")
    ax.set_title("SQNR by scaling scheme and distribution: FP8 (e4m3) and FP4 (e2m1) elements")
    ax.legend(ncol=4, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.08), frameon=False)
    fig.tight_layout()
    return fig


def figure_histograms(plt, report):
    if not report["quantization"]:
        return None
    dists = [d["name"] for d in report["distributions"]]
    q = {(r["distribution"], r["config"]): r for r in report["quantization"]}
    configs = [c for c in HIGHLIGHT if (dists[0], c) in q]
    cols = 3
    nrows = (len(dists) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(13, 3.4 * nrows), sharey=True)
    axes = [a for row in (axes if nrows > 1 else [axes]) for a in row]
    cmap = plt.get_cmap("tab10")
    for ax, d in zip(axes, dists):
        for i, c in enumerate(configs):
            h = q[(d, c)]["rel_error_log2_hist"]
            total = q[(d, c)]["elements"] or 1
            edges = [h["lo"] + b for b in range(len(h["counts"]) + 1)]
            ys = [n / total for n in h["counts"]]
            ax.stairs(ys, edges, color=cmap(i % 10), linewidth=1.3, label=c)
        ax.set_title(d)
        ax.set_xlabel("log2 of |x - q| / |x|")
        ax.set_yscale("log")
        ax.set_ylim(1e-5, 1.5)
    for ax in axes[len(dists):]:
        ax.set_visible(False)
    axes[0].set_ylabel("fraction of elements")
    axes[cols - 1].legend(fontsize=7, loc="upper left", frameon=False)
    fig.suptitle("Histograms of the element-wise relative error (the bin at 0: flushed to zero; "
                 "the end bins also hold everything beyond them)")
    fig.tight_layout()
    return fig


def figure_input(plt, report):
    inp = report.get("input")
    if not inp:
        return None
    tensors = [t for t in inp["tensors"] if "results" in t][:8]
    if not tensors:
        return None
    configs = [r["config"] for r in tensors[0]["results"]]
    fig, ax = plt.subplots(figsize=(11, 0.28 * len(configs) + 1.5))
    height = 0.8 / len(tensors)
    cmap = plt.get_cmap("tab10")
    for i, t in enumerate(tensors):
        ys = [r["sqnr_db"] or 0 for r in t["results"]]
        ax.barh([j + (i - (len(tensors) - 1) / 2) * height for j in range(len(configs))], ys, height,
                label=t["name"], color=cmap(i % 10))
    ax.set_yticks(range(len(configs)), configs)
    ax.invert_yaxis()
    ax.set_xlabel("SQNR (dB)")
    ax.set_title("SQNR on %s" % inp["file"])
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    fig.tight_layout()
    return fig


# ---- tables (shared by Markdown and HTML) -----------------------------------------------------------------

def quantization_table(results):
    head = ["configuration", "SQNR (dB)", "RMSE", "max abs error", "max rel error", "flushed to zero",
            "saturated"]
    rows = []
    for r in results:
        rows.append([r["config"], fmt(r["sqnr_db"], 4), fmt(r["rmse"]), fmt(r["max_abs_error"]),
                     fmt(r["max_rel_error"]), pct(r["flushed_to_zero"]), pct(r["saturated"])])
    return head, rows


def gemm_table(report):
    rows = report["gemm_error_vs_k"]
    ks = sorted({r["k"] for r in rows})
    models = []
    for r in rows:
        if r["model"] not in models:
            models.append(r["model"])
    cell = {(r["model"], r["k"]): r for r in rows}
    head = ["model"] + ["K = %d" % k for k in ks]
    out = []
    for m in models:
        line = [m]
        for k in ks:
            r = cell.get((m, k))
            line.append("-" if r is None else "%s / %s / %s" % (fmt(r["norm_rel_error"]), fmt(r["median_rel_error"]),
                                                                 pct(r["max_rel_error"])))
        out.append(line)
    return head, out


def contract_table(report):
    """One line per named contract and input pair, one column per K: norm-wise / largest element error."""
    rows = report["contract_errors"]
    ks = sorted({r["k"] for r in rows})
    keys = []
    for r in rows:
        if (r["contract"], r["inputs"]) not in keys:
            keys.append((r["contract"], r["inputs"]))
    cell = {(r["contract"], r["inputs"], r["k"]): r for r in rows}
    head = ["contract", "inputs", "output"] + ["K = %d" % k for k in ks]
    out = []
    for c, i in keys:
        first = next(r for r in rows if r["contract"] == c and r["inputs"] == i)
        line = [c, i, first["output_format"]]
        for k in ks:
            r = cell.get((c, i, k))
            line.append("-" if r is None else "overflow" if r.get("overflow") else
                        "%s / %s" % (fmt(r["norm_rel_error"]), pct(r["max_rel_error"])))
        out.append(line)
    return head, out


def contract_note(ex):
    return ("M = N = %d; %s; %s. Reference: %s. Cells: norm-wise error / largest element error (%s)."
            % (ex["m"], ex["pass"], "; ".join("%s: %s" % (i["name"], i["what"]) for i in ex["inputs"]),
               ex["reference"], ex["max_rel_error"]))


def profile_table(report):
    """The divergence matrix: one line per result of each probe, naming the implementations that give it."""
    pd = report["profile_differences"]
    head = ["format", "class", "input", "result", "implementations that agree", "shows"]
    rows = []
    for r in pd["rows"]:
        for k, g in enumerate(r["groups"]):
            result = "undefined" if g["code"] is None else "%s=%s" % (g["code"], g["value"])
            first = k == 0
            rows.append([r["target"] if first else "", r.get("class", "") if first else "", r["input"] if first else "",
                         result, " ".join(g["profiles"]), r["shows"] if first else ""])
    return head, rows


def skipped_ks(entry, report):
    ks = entry.get("k")
    if not ks:
        return ""
    if ks == (report.get("gemm_experiment") or {}).get("k"):
        return " at every K"
    return " at K = " + ", ".join(str(k) for k in ks)


def scalar_text(v):
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    if isinstance(v, float):
        return fmt(v, 6)
    return str(v)


def hardware_tables(run):
    """(title, head, rows) tables of one device-check run: its tests, then each benchmark."""
    tables = []
    tests = run.get("tests", [])
    if tests:
        props = []
        for t in tests:
            for k in (t.get("properties") or {}):
                if k not in props:
                    props.append(k)
        head = ["binary", "test", "result"] + props
        rows = []
        for t in tests:
            p = t.get("properties") or {}
            rows.append([t.get("binary", ""), "%s.%s" % (t.get("suite", ""), t.get("name", "")), t.get("result", "")]
                        + [scalar_text(p[k]) if k in p else "" for k in props])
        tables.append(("tests", head, rows))
    for name, bench in sorted((run.get("benchmarks") or {}).items()):
        if isinstance(bench, dict):
            scalars = [(k, v) for k, v in sorted(bench.items()) if not isinstance(v, list)]
            lists = [(k, v) for k, v in sorted(bench.items()) if isinstance(v, list)]
        else:
            scalars, lists = [("value", bench)], []
        if scalars:
            tables.append(("%s" % name, ["key", "value"], [[k, scalar_text(v)] for k, v in scalars]))
        for key, items in lists:
            if all(isinstance(i, dict) for i in items):
                cols = []
                for i in items:
                    for k in i:
                        if k not in cols:
                            cols.append(k)
                rows = [[scalar_text(i.get(k, "")) for k in cols] for i in items]
                tables.append(("%s: %s" % (name, key), cols, rows))
            else:
                tables.append(("%s: %s" % (name, key), ["value"], [[scalar_text(i)] for i in items]))
    return tables


def highlights(report):
    """A few sentences read off the numbers, on the claims the report exists to check."""
    out = []
    q = {(r["distribution"], r["config"]): r for r in report["quantization"]}

    def m(d, c, key):
        r = q.get((d, c))
        return None if r is None else r.get(key)

    w = [("weight-like", c) for c in ("none/e4m3", "tensor/e4m3", "nvfp4/e2m1")]
    if all(m(d, c, "sqnr_db") is not None for d, c in w):
        out.append("Small values without a scale: on weight-like tensors (values around 2^-6, where e4m3's "
                   "subnormals begin) an unscaled e4m3 cast gives %.1f dB SQNR with %s of the elements flushed "
                   "to zero; the same e4m3 with one scale per tensor gives %.1f dB, and NVFP4's 4-bit elements "
                   "with block scales %.1f dB."
                   % (m(*w[0], "sqnr_db"), pct(m(*w[0], "flushed_to_zero")), m(*w[1], "sqnr_db"),
                      m(*w[2], "sqnr_db")))
    a = [("llm-activations", c) for c in ("tensor/e2m1", "nvfp4/e2m1", "tensor/e4m3", "channel/e4m3")]
    if all(m(d, c, "sqnr_db") is not None for d, c in a):
        out.append("Outliers and per-tensor scales: on LLM-like activations with x100 outlier channels, e2m1 with "
                   "one scale per tensor flushes %s of the elements to zero (its %.1f dB SQNR is carried by the "
                   "outlier channels, which hold most of the energy); NVFP4 flushes %s; in e4m3 the per-tensor "
                   "scale flushes %s and the per-channel one %s."
                   % (pct(m(*a[0], "flushed_to_zero")), m(*a[0], "sqnr_db"), pct(m(*a[1], "flushed_to_zero")),
                      pct(m(*a[2], "flushed_to_zero")), pct(m(*a[3], "flushed_to_zero"))))
    rows = report["gemm_error_vs_k"]
    g = {(r["model"], r["k"]): r for r in rows}
    if rows:
        kmin, kmax = min(r["k"] for r in rows), max(r["k"] for r in rows)
        h0, h, p = g.get(("hopper-fp8", kmin)), g.get(("hopper-fp8", kmax)), g.get(("hopper-fp8-promote128", kmax))
        if h0 and h and p:
            out.append("FP8 accumulation without promotion loses accuracy as K grows: the hopper-fp8 model's "
                       "norm-wise error goes from %s at K = %d to %s at K = %d (largest element error %s); "
                       "promoting every 128 products into f32 (hopper-fp8-promote128) keeps it at %s (%s)."
                       % (fmt(h0["norm_rel_error"]), kmin, fmt(h["norm_rel_error"]), kmax, pct(h["max_rel_error"]),
                          fmt(p["norm_rel_error"]), pct(p["max_rel_error"])))
    return out


# ---- Markdown -------------------------------------------------------------------------------------------------

def md_table(head, rows):
    esc = lambda s: str(s).replace("|", "\\|")
    lines = ["| " + " | ".join(esc(h) for h in head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def provenance(report):
    """One sentence: the lowbit version and the seeds behind every number (report.json's "provenance")."""
    pv = report.get("provenance")
    if not pv:
        return ""
    return ("lowbit %s; synthetic tensors: %s; GEMM inputs: %s; profile differences: %s; %s."
            % (pv["lowbit_version"], pv["synthetic"], pv["gemm"], pv["profile_differences"], pv["run_dependent"]))


def markdown(report, figures):
    md = ["# lowbit accuracy report\n"]
    md.append("lowbit %s, %s mode; regenerate with `%s`. Numbers are deterministic (rounded to 6 significant "
              "digits in report.json); [index.html](index.html) is the same report with embedded figures.\n"
              % (report["lowbit_version"], report["mode"], report["regenerate"]))
    prov = provenance(report)
    if prov:
        md.append("Provenance (no number depends on the date): " + prov + "\n")
    for h in highlights(report):
        md.append("- " + h)
    md.append("")
    for name, title, _ in figures:
        md.append("![%s](figures/%s.png)\n" % (title, name))
    if report["quantization"]:
        md.extend(markdown_schemes(report))
    md.extend(markdown_rest(report))
    return "\n".join(md)


def markdown_schemes(report):
    md = ["## Element formats and scaling schemes\n"]
    md.append("Element policy: %s. Metrics:\n" % report["element_policy"])
    for k, v in report["metrics"].items():
        md.append("- `%s`: %s" % (k, v))
    md.append("")
    md.append(md_table(["distribution", "shape", "seed", "rms", "amax", "description"],
                       [[d["name"], "%d x %d" % (d["rows"], d["cols"]), d["seed"], fmt(d["rms"]), fmt(d["amax"]),
                         d["description"]] for d in report["distributions"]]))
    md.append(md_table(["configuration", "description"], [[c["name"], c["description"]] for c in report["configs"]]))
    for d in report["distributions"]:
        md.append("### %s\n" % d["name"])
        md.append(md_table(*quantization_table([r for r in report["quantization"] if r["distribution"] == d["name"]])))
    return md


def markdown_rest(report):
    md = []
    inp = report.get("input")
    if inp:
        md.append("## Input: %s\n\n%s\n" % (inp["file"], inp.get("note", "")))
        for t in inp["tensors"]:
            md.append("### %s (%s, shape %s)\n" % (t["name"], t["dtype"], t["shape"]))
            if "results" in t:
                md.append(md_table(*quantization_table(t["results"])))
            else:
                md.append("Skipped: %s\n" % t["skipped"])
    e = report.get("gemm_experiment")
    if e:
        md.extend(markdown_gemm(report, e))
    if report.get("contract_experiment"):
        md.append("## Precision contracts: the layer's error\n")
        md.append("%s\n" % contract_note(report["contract_experiment"]))
        md.append(md_table(*contract_table(report)))
    if report.get("profile_differences"):
        md.append("## Where the profiles disagree\n")
        md.append("%s.\n" % report["profile_differences"]["note"])
        md.append(md_table(*profile_table(report)))
    md.extend(markdown_hardware(report))
    return md


def markdown_gemm(report, e):
    md = ["## GEMM error against K\n"]
    md.append("M = N = %d, seed %d; %s. Reference: %s. Cells: norm-wise error / median element error / largest "
              "element error (%s).\n" % (e["m"], e["seed"], e["inputs"], e["reference"], e["max_rel_error"]))
    md.append(md_table(*gemm_table(report)))
    if report.get("gemm_skipped"):
        md.append("Not in the table:\n")
        for s in report["gemm_skipped"]:
            md.append("- %s%s: %s" % (s["model"], skipped_ks(s, report), s["why"]))
        md.append("")
    return md


def markdown_hardware(report):
    md = ["## Hardware runs\n"]
    runs = report.get("hardware_runs") or []
    if not runs:
        md.append("No run of tools/device-check is recorded in reports/device/.\n")
    for run in runs:
        md.append("### %s (%s, %s)\n" % (run["file"], run.get("gpu", {}).get("name", "?"), run.get("date", "")))
        for title, head, rows in hardware_tables(run):
            md.append("**%s**\n" % title)
            md.append(md_table(head, rows))
        if run.get("missing"):
            md.append("Missing: " + "; ".join(run["missing"]) + "\n")
    return md


# ---- HTML ---------------------------------------------------------------------------------------------------------

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1300px;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1, h2, h3 { line-height: 1.2; }
table { border-collapse: collapse; margin: 0.6em 0 1.4em; font-size: 0.86em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; white-space: nowrap; }
th { background: #f2f2f2; }
td:first-child, th:first-child { text-align: left; }
td.text { text-align: left; white-space: normal; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #555; }
code { background: #f4f4f4; padding: 0 0.2em; }
.scroll { overflow-x: auto; }
nav a { margin-right: 1em; }
"""


def h_table(head, rows, text_cols=()):
    e = html.escape
    out = ['<div class="scroll"><table><thead><tr>']
    out += ["<th>%s</th>" % e(str(h)) for h in head]
    out.append("</tr></thead><tbody>")
    for r in rows:
        out.append("<tr>" + "".join('<td%s>%s</td>' % (' class="text"' if i in text_cols else "", e(str(c)))
                                    for i, c in enumerate(r)) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def html_page(report, figures):
    e = html.escape
    p = ['<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
         '<meta name="viewport" content="width=device-width, initial-scale=1">',
         '<link rel="icon" href="data:,">',
         "<title>lowbit accuracy report</title><style>%s</style></head><body>" % CSS,
         "<h1>lowbit accuracy report</h1>",
         "<p>lowbit %s, %s mode. Regenerate with <code>%s</code>. Every number comes from lowbit's exact "
         "machinery on deterministic inputs (report.json holds them, rounded to 6 significant digits).</p>"
         % (e(report["lowbit_version"]), e(report["mode"]), e(report["regenerate"])),
         "<p>Provenance (no number depends on the date): %s</p>" % e(provenance(report)),
         '<nav><a href="#figures">figures</a><a href="#schemes">formats and schemes</a>'
         '<a href="#gemm">GEMM error against K</a><a href="#contracts">precision contracts</a>'
         '<a href="#profiles">profile differences</a>'
         '<a href="#hardware">hardware runs</a></nav>']
    hl = highlights(report)
    if hl:
        p.append("<ul>" + "".join("<li>%s</li>" % e(h) for h in hl) + "</ul>")
    p.append('<h2 id="figures">Figures</h2>')
    for name, title, data in figures:
        uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        p.append('<figure id="fig-%s"><img src="%s" alt="%s"><figcaption>%s</figcaption></figure>'
                 % (e(name), uri, e(title), e(title)))
    p.append('<h2 id="schemes">Element formats and scaling schemes</h2>')
    if not report["quantization"]:
        p.append("<p>Not in this report (--sections).</p>")
    else:
        p.extend(html_schemes(report))
    p.extend(html_rest(report))
    p.append("</body></html>\n")
    return "\n".join(p)


def html_schemes(report):
    e = html.escape
    p = []
    p.append("<p>Element policy: %s.</p><ul>" % e(report["element_policy"]))
    for k, v in report["metrics"].items():
        p.append("<li><code>%s</code>: %s</li>" % (e(k), e(v)))
    p.append("</ul>")
    p.append(h_table(["distribution", "shape", "seed", "rms", "amax", "description"],
                     [[d["name"], "%d x %d" % (d["rows"], d["cols"]), d["seed"], fmt(d["rms"]), fmt(d["amax"]),
                       d["description"]] for d in report["distributions"]], text_cols=(5,)))
    p.append(h_table(["configuration", "description"], [[c["name"], c["description"]] for c in report["configs"]],
                     text_cols=(1,)))
    for d in report["distributions"]:
        p.append("<h3>%s</h3>" % e(d["name"]))
        p.append(h_table(*quantization_table([r for r in report["quantization"] if r["distribution"] == d["name"]])))
    return p


def html_rest(report):
    e = html.escape
    p = []
    inp = report.get("input")
    if inp:
        p.append("<h2 id=\"input\">Input: %s</h2><p>%s</p>" % (e(inp["file"]), e(inp.get("note", ""))))
        for t in inp["tensors"]:
            p.append("<h3>%s (%s, shape %s)</h3>" % (e(t["name"]), e(t["dtype"]), e(str(t["shape"]))))
            p.append(h_table(*quantization_table(t["results"])) if "results" in t
                     else "<p>Skipped: %s</p>" % e(t["skipped"]))
    ex = report.get("gemm_experiment")
    p.append('<h2 id="gemm">GEMM error against K</h2>')
    if not ex:
        p.append("<p>Not in this report (--sections).</p>")
    else:
        p.extend(html_gemm(report, ex))
    p.append('<h2 id="contracts">Precision contracts: the layer\'s error</h2>')
    if not report.get("contract_experiment"):
        p.append("<p>Not in this report (--sections).</p>")
    else:
        p.append("<p>%s</p>" % e(contract_note(report["contract_experiment"])))
        head, rows = contract_table(report)
        p.append(h_table(head, rows, text_cols=(0, 1, 2)))
    p.append('<h2 id="profiles">Where the profiles disagree</h2>')
    if not report.get("profile_differences"):
        p.append("<p>Not in this report (--sections).</p>")
    else:
        p.append("<p>%s.</p>" % e(report["profile_differences"]["note"]))
        head, rows = profile_table(report)
        p.append(h_table(head, rows, text_cols=(4, len(head) - 1)))
    p.extend(html_hardware(report))
    return p


def html_gemm(report, ex):
    e = html.escape
    p = []
    p.append("<p>M = N = %d, seed %d; %s. Reference: %s. Cells: norm-wise error / median element error / largest "
             "element error (%s).</p>" % (ex["m"], ex["seed"], e(ex["inputs"]), e(ex["reference"]),
                                          e(ex["max_rel_error"])))
    p.append(h_table(*gemm_table(report)))
    if report.get("gemm_skipped"):
        p.append("<p>Not in the table:</p><ul>" + "".join(
            "<li>%s%s: %s</li>" % (e(x["model"]), e(skipped_ks(x, report)), e(x["why"]))
            for x in report["gemm_skipped"]) + "</ul>")
    return p


def html_hardware(report):
    e = html.escape
    p = ['<h2 id="hardware">Hardware runs</h2>']
    runs = report.get("hardware_runs") or []
    if not runs:
        p.append("<p>No run of tools/device-check is recorded in reports/device/.</p>")
    for run in runs:
        gpu = run.get("gpu", {})
        p.append("<h3>%s</h3><p>%s, driver %s, %s</p>" % (e(run["file"]), e(gpu.get("name", "?")),
                                                           e(gpu.get("driver_version", "?")), e(run.get("date", ""))))
        for title, head, rows in hardware_tables(run):
            p.append("<p><b>%s</b></p>" % e(title))
            p.append(h_table(head, rows))
        if run.get("missing"):
            p.append("<p>Missing: %s</p>" % e("; ".join(run["missing"])))
    return p


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    path = argv[1]
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError) as err:
        sys.stderr.write("render.py: cannot read %s: %s\n" % (path, err))
        return 2
    if report.get("schema") != "lowbit-report/1":
        sys.stderr.write("render.py: %s is not a lowbit report (schema %r)\n" % (path, report.get("schema")))
        return 2
    plt = load_matplotlib()
    out = os.path.dirname(os.path.abspath(path))
    figures = [("sqnr_by_scheme", "SQNR by scaling scheme and distribution (FP8 and FP4 elements)",
                figure_sqnr_bars),
               ("gemm_error_vs_k", "GEMM error against the exact reference as K grows", figure_gemm),
               ("sqnr_heatmap", "SQNR of every element format x scaling scheme on every distribution",
                figure_sqnr_heatmap),
               ("error_histograms", "Histograms of the element-wise relative error", figure_histograms),
               ("input_sqnr", "SQNR on the --input tensors", figure_input)]
    rendered = []
    for name, title, draw in figures:
        fig = draw(plt, report)
        if fig is not None:
            rendered.append((name, title, png_bytes(plt, fig)))
    os.makedirs(os.path.join(out, "figures"), exist_ok=True)
    for name, _, data in rendered:
        write_atomically(os.path.join(out, "figures", name + ".png"), data)
    # A figure this report has not (input_sqnr without --input) must not linger from an earlier one.
    for name, _, _ in figures:
        stale = os.path.join(out, "figures", name + ".png")
        if name not in [r[0] for r in rendered] and os.path.exists(stale):
            os.remove(stale)
    write_atomically(os.path.join(out, "report.md"), markdown(report, rendered))
    write_atomically(os.path.join(out, "index.html"), html_page(report, rendered))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
