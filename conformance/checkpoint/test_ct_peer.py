"""compressed-tensors itself (peers label): make_checkpoints.py rebuilds the small Llama and compresses it
with the installed compressed-tensors, and every checkpoint it writes verifies as identical.  Runs on the
CPU in about 10 s once torch is imported (torch, transformers and compressed-tensors from
requirements-peers.txt).  The committed fixtures are what the quick tier replays; this shows they are
still what the library writes.
"""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
LOWBIT = os.environ.get("LOWBIT", "lowbit")
PRESETS = ["fp8", "fp8_dynamic", "fp8_block", "nvfp4", "nvfp4a16", "mxfp4a16"]


def _have_peer():
    try:
        import compressed_tensors  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        if os.environ.get("LOWBIT_REQUIRE_PEERS") == "1":
            raise
        pytest.skip(f"compressed-tensors or transformers not installed ({e})")


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    _have_peer()
    out = tmp_path_factory.mktemp("ct")
    subprocess.run([sys.executable, os.path.join(HERE, "make_checkpoints.py"), str(out)], check=True,
                   capture_output=True)
    return out


@pytest.mark.parametrize("preset", PRESETS)
def test_fresh_checkpoint_verifies_identical(fresh, preset):
    p = subprocess.run([LOWBIT, "verify-checkpoint", "--source", fresh / "source", "--quantized", fresh / preset],
                       capture_output=True, check=False)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()


@pytest.mark.parametrize("preset", PRESETS)
def test_committed_fixture_is_what_the_library_writes(fresh, preset):
    for name in ("model.safetensors",):
        with open(fresh / preset / name, "rb") as a, open(os.path.join(HERE, "fixtures", preset, name), "rb") as b:
            assert a.read() == b.read(), f"{preset}/{name} differs from the installed compressed-tensors' output"
