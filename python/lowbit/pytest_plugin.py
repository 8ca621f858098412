"""The package's pytest plugin (the ``pytest11`` entry point ``lowbit`` of pyproject.toml).

Tests made by lowbit.testing.gate_tests() each gate one suite; a suite that compares nothing is skipped
unless required.  This plugin fails the run when such tests ran and none of them compared a case: a gate that
compared nothing has shown nothing, however the skips were spread.
"""
from __future__ import annotations


def pytest_sessionfinish(session, exitstatus):
    from .testing import _session
    if _session["tests"] and _session["cases"] == 0 and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    from .testing import _session
    if _session["tests"]:
        terminalreporter.write_line(
            f"lowbit gate: {_session['cases']} cases compared in {_session['tests']} suite tests"
            + ("; FAILED: nothing was compared" if _session["cases"] == 0 else ""))
