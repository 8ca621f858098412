"""gguf-py itself (peers label): make_gguf.py rewrites the GGUF fixtures with the installed gguf (0.19.0,
requirements-peers.txt) and they equal the committed ones byte for byte and verify identical; and
`lowbit quantize --scheme mx --variant gguf` equals gguf-py's MXFP4.quantize_blocks on fresh random and edge
blocks (every power of two's neighbours, subnormals, ties, NaN and Inf).  About 5 s on the CPU.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_gguf_checkpoints import gguf_blocks, lowbit_mx  # noqa: E402

LOWBIT = os.environ.get("LOWBIT", "lowbit")
FILES = ["llama_mxfp4.gguf", "adversarial.gguf", "adversarial.safetensors", "scheme_blocks.npy",
         "scheme_blocks_gguf.npy"]


def gguf_quants():
    try:
        from gguf.quants import MXFP4
    except ImportError as e:
        if os.environ.get("LOWBIT_REQUIRE_PEERS") == "1":
            raise
        pytest.skip(f"gguf not installed ({e})")
    return MXFP4


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    gguf_quants()
    out = tmp_path_factory.mktemp("gguf")
    subprocess.run([sys.executable, os.path.join(HERE, "make_gguf.py"), str(out)], check=True, capture_output=True)
    return out


@pytest.mark.parametrize("name", FILES)
def test_committed_fixture_is_what_gguf_py_writes(fresh, name):
    with open(fresh / name, "rb") as a, open(os.path.join(HERE, "fixtures", "gguf", name), "rb") as b:
        assert a.read() == b.read(), f"{name} differs from the installed gguf-py's output"


def test_fresh_files_verify_identical(fresh):
    for source, quantized in [(os.path.join(HERE, "fixtures", "source"), fresh / "llama_mxfp4.gguf"),
                              (fresh / "adversarial.safetensors", fresh / "adversarial.gguf")]:
        p = subprocess.run([LOWBIT, "verify-checkpoint", "--source", source, "--quantized", quantized],
                           capture_output=True, check=False)
        assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()


def blocks(rng):
    out = []
    # Every power of two from 2^-149 to 2^127 and its neighbours as the amax: the f32 log2 and the uint8 cast.
    p = 2.0 ** np.arange(-149, 128, dtype=np.float64)
    amax = np.concatenate([p, np.nextafter(p.astype(np.float32), np.float32(0)).astype(np.float64),
                           np.nextafter(p.astype(np.float32), np.float32(np.inf)).astype(np.float64)])
    amax = amax[np.isfinite(amax.astype(np.float32))].astype(np.float32)
    b = (rng.uniform(-1, 1, (amax.size, 32)) * amax[:, None]).astype(np.float32)
    b[:, 0] = amax
    out.append(b)
    # Ties and near-ties: k/4 multiples of a power of two, and one ulp either side.
    half = (2.0 ** rng.integers(-120, 120, (512, 1))).astype(np.float32)
    t = (rng.integers(-24, 25, (512, 32)) / 2.0).astype(np.float32) * half
    t[:, 0] = 8 * half[:, 0]
    out += [t, np.nextafter(t, np.float32(np.inf)), np.nextafter(t, np.float32(-np.inf))]
    # Gaussian weights at many scales, some with a NaN, an Inf or a -0.
    g = (rng.standard_normal((2048, 32)) * 2.0 ** rng.integers(-60, 60, (2048, 1))).astype(np.float32)
    g[::7, 3] = np.nan
    g[::11, 5] = np.inf
    g[::13, 9] = -np.inf
    g[::5, 1] = -0.0
    out.append(g)
    # Random bit patterns (subnormals, huge values, NaNs of every payload).
    out.append(rng.integers(0, 2**32, (2048, 32), dtype=np.uint64).astype(np.uint32).view(np.float32))
    return np.concatenate(out).astype(np.float32)


def test_scheme_equals_quantize_blocks():
    mxfp4 = gguf_quants()
    x = blocks(np.random.default_rng(20261223))
    with np.errstate(all="ignore"):
        want = mxfp4.quantize_blocks(x.copy())
    got = gguf_blocks(*lowbit_mx(x, "--variant", "gguf"))
    bad = np.argwhere(got != want)
    assert not bad.size, f"{len(np.unique(bad[:, 0]))} of {len(x)} blocks differ, first {bad[0][0]}: " \
                         f"x {x[bad[0][0]].tolist()} gguf-py {want[bad[0][0]].tolist()} lowbit {got[bad[0][0]].tolist()}"
    assert x.shape[0] > 6000


# ---- checkpoint::write_gguf read back by gguf-py --------------------------------------------------------------

WRITER_TEST = os.environ.get("LOWBIT_CHECKPOINT_WRITE_TEST")
WRITTEN = [("output.weight", "lm_head.weight"), ("blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"),
           ("blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight"),
           ("blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight"),
           ("blk.0.attn_output.weight", "model.layers.0.self_attn.o_proj.weight"),
           ("blk.0.ffn_gate.weight", "model.layers.0.mlp.gate_proj.weight"),
           ("blk.0.ffn_up.weight", "model.layers.0.mlp.up_proj.weight"),
           ("blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight")]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    gguf_quants()
    if not WRITER_TEST:
        pytest.skip("LOWBIT_CHECKPOINT_WRITE_TEST (the test_checkpoint_write binary) not given")
    out = tmp_path_factory.mktemp("written")
    subprocess.run([WRITER_TEST, "--gtest_filter=GgufWrite.RoundTripsThroughTheReaderAndVerifiesIdentical"],
                   check=True, capture_output=True, env={**os.environ, "LOWBIT_GGUF_WRITE_TO": str(out)})
    return out / "written.gguf"


def test_gguf_reader_reads_what_write_gguf_wrote(written):
    import gguf
    from gguf import GGMLQuantizationType as T
    from make_gguf import SOURCE, read_safetensors

    src = read_safetensors(SOURCE)
    r = gguf.GGUFReader(written)
    assert r.fields["general.architecture"].contents() == "llama"
    tensors = {t.name: t for t in r.tensors}
    assert list(tensors) == [g for g, _ in WRITTEN] + ["output_norm.weight"]
    for g, hf in WRITTEN:
        t = tensors[g]
        assert t.tensor_type == T.MXFP4 and list(t.shape) == list(src[hf].shape[::-1]), g
        want = gguf.quants.quantize(src[hf], T.MXFP4)
        assert np.array_equal(np.asarray(t.data).reshape(want.shape), want), g
        # and gguf-py's own decode of lowbit's blocks is the decode of its own
        assert np.array_equal(gguf.quants.dequantize(np.asarray(t.data), T.MXFP4).reshape(src[hf].shape),
                              gguf.quants.dequantize(want, T.MXFP4).reshape(src[hf].shape)), g
    n = tensors["output_norm.weight"]
    assert n.tensor_type == T.BF16 and list(n.shape) == [64]


def test_write_gguf_equals_gguf_writer(written):
    # The same tensors through gguf-py's GGUFWriter: the same bytes, header, metadata, infos, padding and data.
    import gguf
    from gguf import GGMLQuantizationType as T
    from make_gguf import SOURCE, read_safetensors

    src = read_safetensors(SOURCE)
    path = written.parent / "by_gguf_py.gguf"
    w = gguf.GGUFWriter(path, "llama")
    for g, hf in WRITTEN:
        w.add_tensor(g, gguf.quants.quantize(src[hf], T.MXFP4), raw_dtype=T.MXFP4)
    bf16 = (src["model.norm.weight"].view(np.uint32) >> 16).astype(np.uint16)
    w.add_tensor("output_norm.weight", bf16, raw_shape=bf16.shape, raw_dtype=T.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert path.read_bytes() == written.read_bytes()
