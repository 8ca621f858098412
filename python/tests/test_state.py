"""lowbit.state: TE's delayed scaling derived by hand, torch's GradScaler replayed from the fixture torch 2.15
produced (conformance/state/fixtures/gradscaler.json, its own GradScaler("cpu") over real steps), the JSON and
safetensors forms round-tripping and equal to what `lowbit state convert` writes, a restore compared step by
step, and bad input named."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import lowbit

FIXTURE = pathlib.Path(__file__).resolve().parents[2] / "conformance" / "state" / "fixtures" / "gradscaler.json"
LOWBIT = os.environ.get("LOWBIT")


def bits(v):
    return f"0x{int(np.array(np.float32(v)).view(np.uint32)):08x}"


def layer(history, scale, algorithm="max", margin=0):
    return {"history": [bits(h) for h in history], "scale": bits(scale), "algorithm": algorithm, "margin": margin,
            "element": "e4m3"}


def test_delayed_scaling_by_hand():
    # TE's update: this step's amax goes into slot 0, the scale comes from the history before the roll
    # (max of [3, 0, 0, 0] under "max": 448 / 3, rounded once to f32), then the history rolls by one to the
    # left, slot 0 to the end: [0, 0, 0, 3].
    s = {"layers": {"fc1": layer([0, 0, 0, 0], 1.0)}}
    after = lowbit.state.step(s, amax={"fc1": np.float32(3.0)})
    assert after["layers"]["fc1"]["scale"] == bits(np.float32(448.0) / np.float32(3.0))
    assert after["layers"]["fc1"]["history"] == [bits(0)] * 3 + [bits(3)]
    assert s["layers"]["fc1"]["scale"] == bits(1.0)  # the input is left as it was
    # most_recent with margin 1: 448 / amax / 2 from the newest entry (slot 0 at the update), here 2.0 -> 112.
    s = {"layers": {"fc2": layer([0, 5, 0, 0], 1.0, "most_recent", 1)}}
    assert lowbit.state.step(s, amax={"fc2": "0x40000000"})["layers"]["fc2"]["scale"] == bits(112.0)
    # Several steps at once are the same as one after another.
    s = {"layers": {"fc1": layer([1, 2, 3, 4], 1.0)}}
    seq = [{"amax": {"fc1": float(a)}} for a in (0.5, 8.0, 0.25)]
    one_by_one = s
    for st in seq:
        one_by_one = lowbit.state.step(one_by_one, steps=[st])
    assert lowbit.state.step(s, steps=seq) == one_by_one


def test_grad_scaler_replays_torchs_own_run():
    cases = json.loads(FIXTURE.read_text())["cases"]
    assert cases
    for case in cases:
        state = {"grad_scaler": case["initial"]}
        for k, (found, want) in enumerate(zip(case["found_inf"], case["states"])):
            state = lowbit.state.step(state, found_inf=found)
            got = state["grad_scaler"]
            assert (got["scale"], got["growth_tracker"]) == (want["scale"], want["growth_tracker"]), \
                f"{case['name']} step {k}"


def test_from_grad_scaler_takes_torchs_state_dict():
    sd = {"scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000,
          "_growth_tracker": 7}
    gs = lowbit.state.from_grad_scaler(sd)["grad_scaler"]
    assert gs == {"scale": "0x47800000", "growth_tracker": 7, "growth_factor": 2.0, "backoff_factor": 0.5,
                  "growth_interval": 2000}
    with pytest.raises(ValueError, match="_growth_tracker"):
        lowbit.state.from_grad_scaler({k: v for k, v in sd.items() if k != "_growth_tracker"})


def test_save_and_load_both_forms(tmp_path):
    s = {"layers": {"fc1": layer([1, 2, 3], 0.5), "fc2": layer([0, 0, 7], 2.0, "most_recent", 2)},
         "grad_scaler": {"scale": "0x47800000", "growth_tracker": 3, "growth_factor": 1.1, "backoff_factor": 0.5,
                         "growth_interval": 10}}
    for name in ("s.json", "s.safetensors"):
        lowbit.state.save(s, tmp_path / name)
        assert lowbit.state.load(tmp_path / name) == lowbit.state.load(tmp_path / "s.json")
    assert lowbit.state.load(tmp_path / "s.json")["grad_scaler"]["growth_factor"] == 1.1
    if LOWBIT:  # the command line writes the same safetensors from the JSON
        subprocess.run([LOWBIT, "state", "convert", "--in", str(tmp_path / "s.json"), "--out",
                        str(tmp_path / "cli.safetensors")], check=True)
        assert (tmp_path / "cli.safetensors").read_bytes() == (tmp_path / "s.safetensors").read_bytes()


def test_a_restore_is_compared_step_by_step():
    saved = {"layers": {"fc1": layer([0, 4, 0, 0], 1.0)}}  # slot 0 is this step's amax, 4 an older one
    steps = [{"amax": {"fc1": 1.0}}, {"amax": {"fc1": 1.0}}, {"amax": {"fc1": 1.0}}]
    assert lowbit.state.compare(saved, saved, steps).identical
    # A restore that lost the history: the scale after step 1 differs (448 / 4 against 448 / 1).
    lost = {"layers": {"fc1": layer([0, 0, 0, 0], 1.0)}}
    c = lowbit.state.compare(saved, lost, steps)
    assert not c.identical and c.steps == 3
    (d,) = c.divergences
    assert (d.step, d.layer, d.expected_value, d.actual_value) == (1, "fc1", 112.0, 448.0)


def test_bad_input_is_named(tmp_path):
    s = {"layers": {"fc1": layer([0, 0], 1.0)}}
    with pytest.raises(ValueError, match=r"steps\[0\].*fc2"):
        lowbit.state.step(s, amax={"fc2": 1.0})
    with pytest.raises(ValueError, match="fc1.*not an f32 value"):
        lowbit.state.step(s, amax={"fc1": 0.1})
    with pytest.raises(ValueError, match="amax / found_inf"):
        lowbit.state.step(s)
    with pytest.raises(ValueError, match="history"):
        lowbit.state.step({"layers": {"fc1": {"history": "x", "scale": "0x3f800000"}}}, amax={"fc1": 1.0})
    with pytest.raises(TypeError, match="state"):
        lowbit.state.step([1, 2], amax={"fc1": 1.0})
    (tmp_path / "bad.json").write_text("{\"layers\": ")
    with pytest.raises(ValueError, match="bad.json.*malformed JSON"):
        lowbit.state.load(tmp_path / "bad.json")
    (tmp_path / "t.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(ValueError, match="t.safetensors"):
        lowbit.state.load(tmp_path / "t.safetensors")
    # An invalid state writes nothing.
    with pytest.raises(ValueError):
        lowbit.state.save({"layers": {"fc1": {"history": []}}}, tmp_path / "out.json")
    assert not (tmp_path / "out.json").exists()
