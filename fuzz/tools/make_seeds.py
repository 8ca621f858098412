#!/usr/bin/env python3
"""Writes the seed corpora of fuzz/corpus/ (small, deterministic).  Run from the repository root:
python3 fuzz/tools/make_seeds.py.  The targets' own findings are added by hand (fuzz/README.md)."""
import hashlib
import json
import pathlib
import random
import struct

root = pathlib.Path(__file__).resolve().parents[2]
corpus = root / "fuzz" / "corpus"
rng = random.Random(20261130)


def put(target, name, data):
    d = corpus / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


# Structured targets (FuzzedDataProvider): random bytes of a few lengths are enough to start from.
for target, lengths in {"convert": [8, 24, 40, 64, 200], "scheme": [64, 256, 600, 1200, 2400],
                        "gemm": [32, 128, 300, 700]}.items():
    for i, n in enumerate(lengths):
        put(target, f"random-{i}", bytes(rng.randrange(256) for _ in range(n)))

# files: .npy and safetensors fixtures, and two small golden suites in the harness's section format.
fixtures = root / "conformance" / "io" / "fixtures"
for p in sorted(fixtures.glob("*.npy")):
    put("files", "npy-" + p.stem, b"\x00" + p.read_bytes())
put("files", "safetensors-checkpoint", b"\x01" + (fixtures / "checkpoint.safetensors").read_bytes())


def suite_bytes(folder, keep):
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"] = [f for f in manifest["files"] if keep(f)]
    if "cases" in manifest:
        cases = {f.get("case") for f in manifest["files"]}
        manifest["cases"] = [c for c in manifest["cases"] if c["index"] in cases]
    text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    sections = [text.encode()]
    sha = hashlib.sha256(text.encode()).hexdigest()
    sections.append(b"\n@@@@ manifest.json.sha256\n" + f"{sha}  manifest.json\n".encode())
    for f in manifest["files"]:
        data = (folder / f["path"]).read_bytes()
        sections.append(f"\n@@@@ {f['path']}\n".encode() + data)
        if f["role"] == "expected":
            sections.append(f"\n@@@@ results/{f['path']}\n".encode() + data)
    return b"".join(sections)


golden = root / "vectors" / "golden"
small_convert = suite_bytes(golden / "convert-ocp",
                            lambda f: f["path"] in ("bf16/rne-nosat-keep-after/e2m1.txt", "e4m3/rne-nosat-keep-after/e2m1.txt"))
small_tensor = suite_bytes(golden / "scheme-nvfp4-1level", lambda f: f.get("case") == 0)
for mode in (2, 3):
    put("files", f"suite-convert-{mode}", bytes([mode]) + small_convert)
    put("files", f"suite-tensor-{mode}", bytes([mode]) + small_tensor)

# cli: the first byte picks the command line (fuzz_cli.cpp kCommands); the rest is stdin.
f32 = lambda *v: " ".join("0x%08x" % struct.unpack("<I", struct.pack("<f", x))[0] for x in v)
cli = {
    0: "448\n464\n465\n-inf\nnan\n0x1.8p-10\n1e-400\n-0\n",
    1: "1.25 0x12\n0x1p-3 0xff\n",
    2: "1.0000001\n-3.5e38\n0x1.fffffep127\n",
    3: "0x43f00000\n0x3e99999a\n0x7fc00000\n",
    4: "0x3f80 0x00000001\n0x7f80 0xffffffff\n",
    5: "0x3ff0000000000001\n0x0000000000000001\n",
    6: "0.3\n0\n-1\ninf\n",
    7: "nan\n5\n",
    8: "0x7e\n0x01\n0xff\n",
    9: struct.pack("<3f", 1.0, 500.0, -0.3).decode("latin-1"),
    10: "\x80\x3f\x00\x00\x80\x7f",
    11: "\x1f\x20",
    12: f32(1.0, -2.0, 0.5, 3.0) + "\n",
    13: f32(1.0, -2.0, 448.0, 1e-9) + "\n",
    14: f32(*[i / 3 for i in range(-8, 8)]) + "\n",
    15: f32(*[i * 0.75 for i in range(16)]) + "\n",
    16: "0x3f80 0xc000 0x7f80 0x0001\n",
    17: f32(1.0, -2.0, 0.5, 3.0) + "\n",
    18: "0x3c00 " * 16 + "\n",
    19: '{"block":[1,4],"codes":["0x4","0xe","0x2","0x7"],"element":"e2m1","scales":["0x7e"],"scheme":"mx","shape":[4]}\n',
    20: '{"block":[1,4],"codes":["0x4","0xe","0x2","0x7"],"element":"e2m1","scales":["0x7e"],"scheme":"mx","shape":[4]}\n',
    21: '{"m":1,"n":1,"k":3,"a_format":"e4m3","b_format":"e4m3","a":["0x7e","0xfe","0x08"],"b":["0x38","0x38","0x38"]}\n',
    22: '{"m":1,"n":2,"k":2,"a_format":"e4m3","b_format":"e5m2","a":["0x7e","0x08"],"b":["0x3c","0x38","0x7c","0x01"]}\n',
    23: '{"m":1,"n":1,"k":2,"a_format":"e4m3","b_format":"e4m3","a":["0x38","0x38"],"b":["0x38","0x38"],'
        '"scale_format":"e8m0","scale_block":32,"a_scales":["0x7f"],"b_scales":["0x80"]}\n',
    24: '{"m":1,"n":1,"k":16,"a_format":"e2m1","b_format":"e2m1","a":' + json.dumps(["0x2"] * 16) + ',"b":' +
        json.dumps(["0x7"] * 16) + ',"scale_format":"ue4m3","scale_block":16,"a_scales":["0x38"],"b_scales":["0x38"]}\n',
    25: '{"m":1,"n":1,"k":2,"a_format":"f16","b_format":"f16","a":["0x3c00","0x7c00"],"b":["0x3c00","0x0001"],"c":["0x3c00"]}\n',
    26: '{"m":2,"n":1,"k":2,"a_format":"bf16","b_format":"bf16","a":["0x3f80","0x3f80","0x7f80","0xff80"],"b":["0x3f80","0x3f80"],"c":["0x3f800000","0x00000000"]}\n',
}
for i, text in cli.items():
    put("cli", f"cmd-{i:02d}", bytes([i]) + text.encode("latin-1"))
