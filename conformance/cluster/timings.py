"""What a merged conformance report may differ in from the unsharded run's: its timings, and nothing else.

`lowbit merge` writes the start of the earliest shard, each check's seconds as the sum of its shards'
seconds and the total as the sum of the shards' totals (tools/slurm/README.md).  These functions replace
exactly those fields with a fixed mark, so that two reports compare equal byte for byte when all else is.
"""
import json
import re
from pathlib import Path

MARK = "<timing>"


def conformance_json(text):
    doc = json.loads(text)
    doc["started"] = MARK
    doc["seconds"] = MARK
    for check in doc["checks"]:
        check["seconds"] = MARK
    return json.dumps(doc, indent=2)


def conformance_md(text):
    out = []
    for line in text.splitlines(keepends=True):
        line = re.sub(r"^- started: \S+$", "- started: " + MARK, line, flags=re.M)
        line = re.sub(r"^- total: [0-9.]+ s on ", "- total: " + MARK + " s on ", line)
        # The table's rows: | check | tier | cases | mismatches | seconds | status |
        m = re.match(r"^(\| [^|]+ \| (?:quick|full) \| \d+ \| \d+ \| )[0-9.]+( \| \S+ \|\n?)$", line)
        if m:
            line = m.group(1) + MARK + m.group(2)
        out.append(line)
    return "".join(out)


def junit_xml(text):
    return re.sub(r' time="[0-9.]+"', ' time="' + MARK + '"', text)


NORMALISE = {"conformance.json": conformance_json, "conformance.md": conformance_md, "junit.xml": junit_xml}


def report_files(folder):
    """The three report files of a conformance run, timings marked, by name."""
    folder = Path(folder)
    return {name: fix((folder / name).read_text()) for name, fix in NORMALISE.items()}



def main(argv):
    """timings.py A B: compare two conformance report folders with their timings blanked."""
    import difflib
    import sys

    if len(argv) != 3:
        print("usage: timings.py REPORT_DIR REPORT_DIR", file=sys.stderr)
        return 2
    try:
        a, b = report_files(argv[1]), report_files(argv[2])
    except OSError as e:
        print("timings.py: %s" % e, file=sys.stderr)
        return 2
    differ = False
    for name in NORMALISE:
        if a[name] != b[name]:
            differ = True
            sys.stdout.writelines(difflib.unified_diff(a[name].splitlines(True), b[name].splitlines(True),
                                                       "%s/%s" % (argv[1], name), "%s/%s" % (argv[2], name)))
    if not differ:
        print("%s and %s: identical apart from timings (%s)" % (argv[1], argv[2], ", ".join(NORMALISE)))
    return 1 if differ else 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv))
