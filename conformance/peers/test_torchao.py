"""torchao 0.18's MX and NVFP4 quantizers against lowbit's schemes (prototype/mx_formats/):

  * to_mx(x, elem_dtype, 32, FLOOR | CEIL | EVEN | RCEIL) (mx_tensor.py; RCEIL's CPU fallback) ->
    `lowbit quantize --scheme mx --element E --scale-rule R --profile torchao` (Variant::torchao), every
    element type torchao has, NaN and Inf blocks included for the fp8 elements (their casts are torch's);
    the fp4 / fp6 elements on finite blocks only (see below);

  * single level, nvfp4_quantize(x) -> `lowbit quantize --scheme nvfp4-1level`;
  * two levels, nvfp4_quantize(x, per_tensor_scale=per_tensor_amax_to_scale(amax(|x|))) ->
    `lowbit quantize --scheme nvfp4 --profile torchao` (Variant::torchao).

Compared bit for bit: every e2m1 code (torchao packs two per byte, element 2i in the low nibble), every e4m3
block scale and the f32 tensor scale.  The tensors: ordinary ones (Gaussian at magnitudes 2^-30 .. 2^30,
outlier rows, log-normal), blocks whose elements sit exactly where fp32(x / scale) and fp32(x * fp32(1 /
scale)) round to different e2m1 codes (found here with torch's own float32 arithmetic), all-zero blocks
(scale 2^-6), tiny blocks (the lower clamp), blocks past 448 * 6 (the upper clamp, elements saturating).

Not compared: for NVFP4 and for MX's fp4 / fp6 elements, NaN inputs (and for NVFP4 Inf inputs and the
all-zero tensor).  torchao gives them NaN scales or NaN quotients, and its fp4 / fp6 cast
(custom_fp_utils._f32_to_floatx_unpacked) has no NaN case: a NaN element's code is whatever its bit pattern
makes of the normal path's integer arithmetic (0x7fc00000 gives 3, 0xffc00000 gives 11, 0x7fffffff gives
4), so it depends on which NaN x86 propagates through x * (1 / scale).  lowbit does not model NaN payloads
through that cast.  (`peers` label: torch on the CPU, about 10 s.)
"""
import numpy as np

import peerlib

torch = peerlib.require("torch")
nvfp4 = peerlib.require("torchao.prototype.mx_formats.nvfp4_tensor")

def torchao_nvfp4(x, two_level):
    """(codes [R, C] uint8, scales [R, C/16] uint8, tensor scale as uint32 bits or None) from torchao."""
    xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    pts = nvfp4.per_tensor_amax_to_scale(xt.abs().max()) if two_level else None
    scales, packed = nvfp4.nvfp4_quantize(xt, block_size=16, per_tensor_scale=pts)
    p = packed.numpy()
    codes = np.stack([p & 0xF, p >> 4], -1).reshape(x.shape).astype(np.uint8)
    ts = None if pts is None else int(pts.numpy().astype(np.float32).reshape(1).view(np.uint32)[0])
    return codes, scales.view(torch.uint8).numpy().reshape(x.shape[0], -1), ts


def tie_pairs():
    """(scale, x) with e2m1(fp32(x / scale)) != e2m1(fp32(x * fp32(1 / scale))), by torch's float32."""
    e4m3 = torch.arange(0x08, 0x7F, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    s = e4m3.repeat_interleave(ties.numel() * 7)
    base = (ties.repeat(e4m3.numel()) * e4m3.repeat_interleave(ties.numel())).repeat_interleave(7)
    x = (base.view(torch.int32) + torch.arange(-3, 4, dtype=torch.int32).repeat(base.numel() // 7)).view(torch.float32)
    # Where the two fp32 results differ at all; which of them change an e2m1 code is torchao's to say below.
    differ = (x / s) != (x * (1.0 / s))
    return s[differ].numpy(), x[differ].numpy()


def cases(rng):
    out = []
    for mag in range(-30, 31, 3):
        out.append((rng.standard_normal((8, 64)) * 2.0**mag).astype(np.float32))
    x = rng.standard_normal((16, 128)).astype(np.float32)
    x[3] *= 1e4
    out.append(x)
    out.append(np.exp(rng.standard_normal((8, 64)) * 3).astype(np.float32) * rng.choice([-1, 1], (8, 64)))
    s, t = tie_pairs()
    # One pair per block: the block amax 6 * s makes the block scale s itself (single level).
    n = (len(s) // 4) * 4
    blocks = np.zeros((n, 16), np.float32)
    blocks[:, 0] = 6 * s[:n]
    blocks[:, 1] = t[:n]
    blocks[:, 2] = -t[:n]
    out.append(blocks.reshape(-1, 64))
    z = rng.standard_normal((4, 64)).astype(np.float32)
    z[1, 16:32] = 0  # an all-zero block
    z[2, :16] = 1e-30  # below the lower clamp
    z[3, 32:48] = 1e6  # past 448 * 6: the single level's scale clamps and its elements saturate
    out.append(z)
    return out


def test_nvfp4_single_and_two_level_bit_for_bit():
    rng = np.random.default_rng(20261201)
    compared = 0
    failures = []
    for two in (False, True):
        for i, x in enumerate(cases(rng)):
            want = torchao_nvfp4(x, two)
            got = peerlib.lowbit_nvfp4(x, two)
            for name, w, g in zip(("codes", "scales", "tensor scale"), want, got):
                if w is None:
                    continue
                w, g = np.asarray(w), np.asarray(g)
                bad = np.argwhere(w != g)
                compared += w.size
                if bad.size:
                    k = tuple(bad[0])
                    failures.append(f"{'two' if two else 'one'} level case {i} {name}: {len(bad)} differ, first "
                                    f"{k}: torchao {int(w[k]):#x}, lowbit {int(g[k]):#x}")
    assert not failures, "\n".join(failures)
    assert compared > 50_000
    assert not failures, "\n".join(failures)


def test_the_tie_blocks_tell_the_reciprocal_from_the_quotient():
    # The cases above are worth their place only if the quotient (earlier torchao, and lowbit before 0.18)
    # and the reciprocal give other codes there: count them with torchao's own e2m1 cast.
    cast = peerlib.require("torchao.prototype.custom_fp_utils")._f32_to_floatx_unpacked
    s, t = (torch.from_numpy(a) for a in tie_pairs())
    quotient = cast((t / s).contiguous(), 2, 1)
    reciprocal = cast((t * (1.0 / s)).contiguous(), 2, 1)
    assert int((quotient != reciprocal).sum()) > 50


MX_TYPES = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "e2m3": "fp6_e2m3", "e3m2": "fp6_e3m2",
            "e2m1": "float4_e2m1fn_x2"}
MX_RULES = ("floor", "ceil", "even", "rceil")


def torchao_mx(x, element, rule):
    """(codes [R, C] uint8, e8m0 scales [R, C/32] uint8) from torchao's to_mx."""
    mx = peerlib.require("torchao.prototype.mx_formats.mx_tensor")
    modes = peerlib.require("torchao.prototype.mx_formats.config").ScaleCalculationMode
    dtype = MX_TYPES[element]
    dtype = getattr(torch, dtype) if hasattr(torch, dtype) else dtype  # the fp6 types are torchao's strings
    scales, data = mx.to_mx(torch.from_numpy(np.ascontiguousarray(x, np.float32)), dtype, 32, getattr(modes, rule.upper()))
    d = data.view(torch.uint8).numpy()
    codes = np.stack([d & 0xF, d >> 4], -1).reshape(x.shape) if element == "e2m1" else d.reshape(x.shape)
    return codes.astype(np.uint8), scales.view(torch.uint8).numpy().reshape(x.shape[0], -1)


def mx_cases(rng, nonfinite):
    out = [(rng.standard_normal((4, 64)) * 2.0**mag).astype(np.float32) for mag in range(-40, 41, 8)]
    z = rng.standard_normal((8, 64)).astype(np.float32)
    z[0, :32] *= 1e-39  # a subnormal amax: code 0 (torchao divides by 2^-126 there)
    z[1, :32] = 0
    if nonfinite:  # NaN blocks (the NaN scale: finite elements 0), Inf blocks (2^128 read from the bits)
        z[2, 3] = np.nan
        z[3, 5], z[3, 40] = np.inf, -np.inf
        z[4, 7], z[4, 8] = -np.nan, np.inf
        z[5, 33] = np.nan
    z[7, :32] *= 3e38 / 4
    out.append(z)
    # RCEIL's descale just above powers of two, where its CPU fallback's f32 log2 and cvt.rp part.
    w = (rng.standard_normal((40, 32)) * 2.0 ** np.arange(-100, 100, 5)[:, None]).astype(np.float32)
    w[:, 0] = (448 * 2.0 ** np.arange(-100, 100, 5)).astype(np.float32) * np.float32(1 + 2**-23)
    out.append(w)
    return out


def lowbit_mx(x, element, rule, variant=None):
    extra = ["--variant", variant] if variant else []
    return peerlib.lowbit_scheme(x, ["--scheme", "mx", "--element", element, "--scale-rule", rule, "--profile",
                                     "torchao", *extra])[:2]


def test_mx_to_mx_bit_for_bit():
    rng = np.random.default_rng(20261202)
    failures, compared = [], 0
    for element in MX_TYPES:
        for rule in MX_RULES:
            for i, x in enumerate(mx_cases(rng, nonfinite=element in ("e4m3", "e5m2"))):
                want, got = torchao_mx(x, element, rule), lowbit_mx(x, element, rule)
                for name, w, g in zip(("codes", "scales"), want, got):
                    compared += w.size
                    bad = np.argwhere(w != g)
                    if bad.size:
                        k = tuple(bad[0])
                        failures.append(f"{element} {rule} case {i} {name}: {len(bad)} differ, first {k}: torchao "
                                        f"{int(w[k]):#x}, lowbit {int(g[k]):#x}")
    assert not failures, "\n".join(failures)
    assert compared > 50_000


def test_mx_cases_tell_torchao_from_the_standard_rules():
    # The NaN, Inf and code-0 blocks and RCEIL's powers of two are where torchao's to_mx is not the OCP / cvt.rp
    # rule: under --variant standard the same cases differ, so the comparison above is not vacuous.
    rng = np.random.default_rng(20261202)
    for rule in MX_RULES:
        differ = 0
        for x in mx_cases(rng, nonfinite=True):
            want = torchao_mx(x, "e4m3", rule)
            got = lowbit_mx(x, "e4m3", rule, variant="standard")
            differ += sum(int((w != g).sum()) for w, g in zip(want, got))
        assert differ > 0, rule
