"""The installed package: stubs shipped and complete, every public function documented with a runnable
example (the examples are run), the `lowbit` console command, and the import's own facts."""
import ast
import doctest
import inspect
import os
import pathlib
import subprocess
import sys

import pytest

import lowbit
from lowbit import _lowbit

PUBLIC = [lowbit.convert, lowbit.decode, lowbit.codes, lowbit.format, lowbit.formats, lowbit.profiles, lowbit.models,
          lowbit.quantize, lowbit.gemm, lowbit.testing.assert_bitexact,
          lowbit.contract.names, lowbit.contract.show, lowbit.contract.run, lowbit.contract.check,
          lowbit.contract.assert_matches, lowbit.state.load, lowbit.state.save, lowbit.state.step,
          lowbit.state.compare, lowbit.state.from_grad_scaler]


def test_stubs_are_shipped_and_name_every_function():
    root = pathlib.Path(lowbit.__file__).parent
    assert (root / "py.typed").is_file()
    stub = ast.parse((root / "_lowbit.pyi").read_text())
    names = {n.name for n in stub.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    exported = {n for n in dir(_lowbit) if not n.startswith("_")}
    assert exported and exported <= names, exported - names


@pytest.mark.parametrize("fn", PUBLIC, ids=[f.__name__ for f in PUBLIC])
def test_every_public_function_has_a_docstring_with_an_example(fn):
    doc = inspect.getdoc(fn)
    assert doc and "Example:" in doc and ">>>" in doc


@pytest.mark.parametrize("module", ["lowbit", "lowbit._formats", "lowbit._convert", "lowbit._quantize", "lowbit._gemm",
                                    "lowbit._arrays", "lowbit.testing",
                                    "lowbit.contract", "lowbit.state"])
def test_docstring_examples_run(module):
    mod = sys.modules[module] if module in sys.modules else __import__(module, fromlist=["_"])
    result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_console_command_is_the_command_line():
    exe = pathlib.Path(sys.executable).parent / "lowbit"
    assert exe.is_file() and os.access(exe, os.X_OK)
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"lowbit {lowbit.__version__}"
