"""README.md's examples, as conformance/readme/README.md describes them: the ```console blocks (commands
after `$ `, each followed by the output it prints), the ```pycon block (an interpreter transcript), and the
```python blocks whose first line names a file (`# subject.py ...`), which the console examples run."""
import dataclasses
import pathlib
import re

# A marker is an HTML comment on the line just above a block's opening fence (invisible in the rendered
# README):  <!-- readme-test: skip REASON -->  or  <!-- readme-test: needs PATH -->
MARKER = re.compile(r"^<!-- readme-test: (skip|needs) (.+?) -->$")
FENCE = re.compile(r"^```(\w*)\s*$")
FILE_BLOCK = re.compile(r"^# ([\w.-]+\.py)\b")


@dataclasses.dataclass
class Command:
    line: int          # README line of the `$ ` prompt (1-based)
    text: str          # the command, continuation lines joined with newlines (bash reads `\` + newline)
    expected: list     # the output lines README shows


@dataclasses.dataclass
class Block:
    kind: str          # console, pycon, python
    line: int          # README line of the opening fence
    body: list         # the lines between the fences
    marker: tuple = None  # ("skip", reason) or ("needs", path)

    @property
    def file_name(self):
        m = FILE_BLOCK.match(self.body[0]) if self.kind == "python" and self.body else None
        return m.group(1) if m else None


def blocks(readme):
    """Every fenced block of README.md, with its marker."""
    lines = pathlib.Path(readme).read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        i += 1
        while i < len(lines) and lines[i] != "```":
            i += 1
        if i == len(lines):
            raise ValueError(f"README.md line {start + 1}: a fence that is never closed")
        marker = MARKER.match(lines[start - 1]) if start > 0 else None
        out.append(Block(m.group(1), start + 1, lines[start + 1:i], marker.groups() if marker else None))
        i += 1
    return out


def commands(block):
    """The commands of a console block, each with the output README shows for it (trailing blank lines
    dropped: they separate the examples)."""
    cmds, i, body = [], 0, block.body
    if body and not body[0].startswith("$ "):
        raise ValueError(f"README.md line {block.line + 1}: a console block must start with a `$ ` command")
    while i < len(body):
        first = i
        text = body[i][2:]
        while text.endswith("\\") and i + 1 < len(body):
            i += 1
            text += "\n" + body[i]
        i += 1
        expected = []
        while i < len(body) and not body[i].startswith("$ "):
            expected.append(body[i])
            i += 1
        while expected and not expected[-1].strip():
            expected.pop()
        cmds.append(Command(block.line + 1 + first, text, expected))
    return cmds


def output_lines(text):
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return lines
