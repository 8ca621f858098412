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

# gguf: the edge-block file gguf-py wrote (conformance/checkpoint/fixtures/gguf), and one file of every metadata
# value type with an F32, a BF16 and an MXFP4 tensor.
put("gguf", "adversarial", (root / "conformance" / "checkpoint" / "fixtures" / "gguf" / "adversarial.gguf").read_bytes())


def gguf_string(s):
    return struct.pack("<Q", len(s)) + s.encode()


kv = [("a.u8", 0, b"\x07"), ("a.i8", 1, b"\xff"), ("a.u16", 2, b"\x01\x02"), ("a.i16", 3, b"\xff\xff"),
      ("a.u32", 4, struct.pack("<I", 9)), ("a.i32", 5, struct.pack("<i", -9)), ("a.f32", 6, struct.pack("<f", 1.5)),
      ("a.bool", 7, b"\x01"), ("general.architecture", 8, gguf_string("llama")),
      ("a.arr", 9, struct.pack("<IQ", 8, 2) + gguf_string("a") + gguf_string("b")),
      ("a.nested", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 4, 1) + struct.pack("<I", 5)),
      ("a.u64", 10, struct.pack("<Q", 2**63)), ("a.i64", 11, struct.pack("<q", -1)),
      ("a.f64", 12, struct.pack("<d", 0.25)), ("general.alignment", 4, struct.pack("<I", 32))]
tensors = [("f", [3], 0, struct.pack("<3f", 1, 2, 3)), ("b", [2, 1], 30, b"\x80\x3f\x00\x40"),
           ("m", [32, 2], 39, bytes([127]) + bytes(range(16)) + bytes([0x7e]) + bytes(range(16, 32)))]
head = struct.pack("<IIQQ", 0x46554747, 3, len(tensors), len(kv))
head += b"".join(gguf_string(k) + struct.pack("<I", t) + v for k, t, v in kv)
data = b""
for name, dims, qtype, blob in tensors:
    head += gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
    head += struct.pack("<IQ", qtype, len(data))
    data += blob + bytes(-len(blob) % 32)
put("gguf", "every-type", head + bytes(-len(head) % 32) + data)
