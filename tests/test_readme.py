"""The README's Python examples run, and the numbers in their comments are what they give.

Every ```python block of README.md is executed statement by statement in one namespace.
A statement that is a bare expression followed by a comment starting with a number is
checked: the numbers in the comment (up to its first word) must equal the expression's
value (a number or a nested tuple of numbers) rounded to the decimals the comment shows.
"""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def python_blocks(text):
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def quoted_numbers(comment):
    """Numbers at the start of a comment, before its first word ('24.03 (against 99..)'
    gives [24.03]; '4.00, (3.96, 4.04): estimate' gives the three numbers)."""
    head = re.split(r"[A-Za-z]", comment, maxsplit=1)[0]
    return NUMBER.findall(head)


def flatten(value):
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in flatten(v)]
    return [float(value)]


def checked_lines(block):
    """(statement source, comment) for each expression statement with a numeric comment."""
    lines = block.splitlines()
    out = []
    for node in ast.parse(block).body:
        line = lines[node.end_lineno - 1]
        if isinstance(node, ast.Expr) and "#" in line:
            comment = line.split("#", 1)[1].strip()
            if quoted_numbers(comment):
                out.append((node, comment))
    return out


def test_readme_has_a_checked_example():
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "README.md has no ```python block"
    assert sum(len(checked_lines(b)) for b in blocks) >= 3


def test_quoted_numbers_parser():
    assert quoted_numbers("24.0298 (against 99 without centralization)") == ["24.0298"]
    assert quoted_numbers("4.0044, (3.9692, 4.0397): estimate") == \
        ["4.0044", "3.9692", "4.0397"]
    assert quoted_numbers("s[i] = fraction") == []


def check_block(block):
    """Execute a block; return the list of comments that disagree with the values."""
    tree = ast.parse(block)
    lines = block.splitlines()
    ns: dict = {}
    wrong = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the README's example must run clean
        for node in tree.body:
            line = lines[node.end_lineno - 1]
            comment = line.split("#", 1)[1].strip() if "#" in line else ""
            nums = quoted_numbers(comment) if isinstance(node, ast.Expr) else []
            if not nums:
                exec(compile(ast.Module([node], []), "README.md", "exec"), ns)
                continue
            value = eval(compile(ast.Expression(node.value), "README.md", "eval"), ns)
            got = flatten(value)
            if len(got) != len(nums):
                wrong.append(f"{ast.unparse(node)}: {len(got)} values, comment quotes "
                             f"{len(nums)}")
                continue
            for g, q in zip(got, nums):
                decimals = len(q.split(".")[1]) if "." in q and "e" not in q.lower() else 0
                if abs(g - float(q)) > 0.5 * 10 ** -decimals * (1 + 1e-9):
                    wrong.append(f"{ast.unparse(node)} gives {g!r}, README says {q}")
    return wrong


def test_the_checker_catches_a_stale_number():
    assert check_block("x = 2.5\nx, x + 1    # 2.5, 3.5: fine\n") == []
    assert len(check_block("x = 2.5\nx    # 2.4 stale\n")) == 1
    assert len(check_block("x = 2.5\nx, x    # 2.5 one number only\n")) == 1


@pytest.mark.parametrize("index", range(len(python_blocks(README.read_text("utf-8")))))
def test_readme_block_runs_and_prints_what_it_says(index):
    block = python_blocks(README.read_text(encoding="utf-8"))[index]
    wrong = check_block(block)
    assert not wrong, "README.md example out of date:\n" + "\n".join(wrong)
