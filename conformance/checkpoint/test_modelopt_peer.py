"""ModelOpt itself (peers label): make_modelopt.py rebuilds the small Llama and quantizes and exports it with the
installed nvidia-modelopt (0.47.0, requirements-peers.txt), on the CPU in about 5 s once torch is imported;
every checkpoint it writes verifies as identical and equals the committed fixture.
"""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
LOWBIT = os.environ.get("LOWBIT", "lowbit")
NAMES = ["modelopt_fp8", "modelopt_nvfp4"]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    try:
        import modelopt  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        if os.environ.get("LOWBIT_REQUIRE_PEERS") == "1":
            raise
        pytest.skip(f"nvidia-modelopt or transformers not installed ({e})")
    out = tmp_path_factory.mktemp("modelopt")
    subprocess.run([sys.executable, os.path.join(HERE, "make_modelopt.py"), str(out)], check=True, capture_output=True)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_fresh_export_verifies_identical(fresh, name):
    p = subprocess.run([LOWBIT, "verify-checkpoint", "--source", os.path.join(HERE, "fixtures", "source"),
                        "--quantized", fresh / name], capture_output=True, check=False)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()


@pytest.mark.parametrize("name", NAMES)
def test_committed_fixture_is_what_modelopt_writes(fresh, name):
    for f in ("model.safetensors", "hf_quant_config.json"):
        with open(fresh / name / f, "rb") as a, open(os.path.join(HERE, "fixtures", name, f), "rb") as b:
            assert a.read() == b.read(), f"{name}/{f} differs from the installed ModelOpt's export"
