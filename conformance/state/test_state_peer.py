"""Differential test against PyTorch's GradScaler on the CPU (peers label): make_gradscaler.py is run with the
installed torch, its output must equal the committed fixture (so the quick tier's replay stands for this
torch), and every state it records is reproduced by `lowbit state step`.  About 5 s."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

if os.environ.get("LOWBIT_REQUIRE_PEERS"):
    import torch  # noqa: F401  (under the peers label a missing torch is a failure, not a skip)
else:
    pytest.importorskip("torch", reason="torch is a peer (requirements-peers.txt); the quick tier replays its fixture")

from test_state import FIXTURE, chain  # noqa: E402


def test_torch_regenerates_the_fixture_and_lowbit_follows(tmp_path):
    out = tmp_path / "gradscaler.json"
    subprocess.run([sys.executable, os.path.join(HERE, "make_gradscaler.py"), str(out)], check=True)
    fresh = json.loads(out.read_text())
    committed = json.load(open(FIXTURE))
    assert fresh["cases"] == committed["cases"], f"torch {fresh['torch']} differs from the fixture's {committed['torch']}"
    for case in fresh["cases"]:
        got = chain(tmp_path, {"grad_scaler": case["initial"]}, case["found_inf"])
        assert got == case["states"], case["name"]
