"""README.md's Python transcript (the ```pycon block) prints what README shows (ctest readme_python, quick
tier, in the Python package's virtual environment: python/CMakeLists.txt).

doctest runs it with no option flags, so every output line must match exactly.  A traceback is compared
as doctest compares one: the "Traceback (most recent call last):" line and the exception's type and
message, the frames between them being left out in README as doctest ignores them.
"""
import doctest
import os
import pathlib
import traceback

import readme_examples as rx

README = pathlib.Path(os.environ["LOWBIT_SOURCE_DIR"]) / "README.md"


def test_python_transcript():
    blocks = [b for b in rx.blocks(README) if b.kind == "pycon"]
    assert len(blocks) == 1, [b.line for b in blocks]
    block = blocks[0]
    test = doctest.DocTestParser().get_doctest("\n".join(block.body) + "\n", {}, "README.md", str(README),
                                               block.line)
    assert len(test.examples) >= 10, len(test.examples)
    failures = []

    class Runner(doctest.DocTestRunner):
        def report_failure(self, out, test, example, got):
            failures.append(f"README.md line {block.line + 1 + example.lineno}: >>> {example.source.strip()}\n"
                            f"--- README shows\n{example.want}--- Python printed\n{got}")

        def report_unexpected_exception(self, out, test, example, exc_info):
            failures.append(f"README.md line {block.line + 1 + example.lineno}: >>> {example.source.strip()}\n"
                            f"--- README shows\n{example.want}--- Python raised\n"
                            + "".join(traceback.format_exception_only(*exc_info[:2])))

    result = Runner(optionflags=0).run(test, out=lambda s: None)
    assert result.attempted == len(test.examples)
    assert not failures, "\n\n".join(failures)
