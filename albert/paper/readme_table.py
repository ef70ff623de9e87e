"""The README's results table, made from docs/paper.md's scorecard so that the two cannot differ.

    python -m albert.paper readme            # rewrites the README's results block
    python -m albert.paper readme --check    # exit 1 when the README's block is stale

The block lies between two comment lines in README.md. It holds the scorecard's date and one row
per table or figure that two CPU cores can test. A row is left out when its verdict is only "not
checkable on this hardware" or when it is a configuration; each row that stays keeps the
scorecard's verdict word for word. Links relative to docs/ are made relative to the repository
root.
"""

import os
import re
import sys
from typing import List, Tuple

from albert import io
from albert.errors import InputError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BEGIN = "<!-- results: made by `python -m albert.paper readme` from docs/paper.md's scorecard -->"
END = "<!-- end of results -->"
_LEFT_OUT = ("**not checkable on this hardware**", "a configuration, not a result")


def _cells(line: str) -> List[str]:
    """A markdown table row's cells (a `|` escaped as `\\|` stays in its cell)."""
    parts = re.split(r"(?<!\\)\|", line.strip())
    return [part.strip() for part in parts[1:-1]]


def scorecard(paper_md: str) -> Tuple[str, List[Tuple[str, str]]]:
    """(the page's date, [(first cell, verdict cell), ...]) of the scorecard table."""
    date = re.search(r"as of \*\*(\d{4}-\d{2}-\d{2})\*\*", paper_md)
    if date is None:
        raise InputError("docs/paper.md does not say 'as of **YYYY-MM-DD**'")
    section = paper_md.split("## Scorecard", 1)
    if len(section) != 2:
        raise InputError("docs/paper.md has no '## Scorecard' section")
    lines = [line for line in section[1].split("\n## ", 1)[0].splitlines()
             if line.startswith("|")]
    header = _cells(lines[0])
    verdict = header.index("verdict")
    rows = [_cells(line) for line in lines[2:]]
    return date.group(1), [(row[0], row[verdict]) for row in rows]


def _from_root(cell: str) -> str:
    """Markdown links relative to docs/ made relative to the repository root."""
    def fix(match):
        target = match.group(2)
        if re.match(r"[a-z]+:|#|/", target):
            return match.group(0) if not target.startswith("#") else \
                f"[{match.group(1)}](docs/paper.md{target})"
        return f"[{match.group(1)}](docs/{target})"
    return re.sub(r"\[([^\]]*)\]\(([^)]*)\)", fix, cell)


def block(paper_md: str) -> str:
    """The README's results block, markers included."""
    date, rows = scorecard(paper_md)
    kept = [(name, verdict) for name, verdict in rows
            if not any(verdict.startswith(start) for start in _LEFT_OUT)]
    lines = [BEGIN, "",
             f"Every verdict of the [scorecard](docs/paper.md#scorecard) that two CPU cores can "
             f"judge, as of **{date}**, word for word (the claims, the measurements and the "
             "intervals are there):", "", "| paper | verdict |", "|---|---|"]
    lines += [f"| {_from_root(name)} | {_from_root(verdict)} |" for name, verdict in kept]
    return "\n".join(lines + ["", END])


def updated_readme(readme: str, paper_md: str) -> str:
    if BEGIN not in readme or END not in readme:
        raise InputError(f"README.md has no results block (the lines {BEGIN!r} ... {END!r})")
    before, rest = readme.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    return before + block(paper_md) + after


def add_arguments(parser) -> None:
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 when README.md's results are stale "
                             "(default: rewrite them)")


def main(args) -> int:
    check = args.check
    readme_path, paper_path = os.path.join(REPO, "README.md"), os.path.join(REPO, "docs", "paper.md")
    readme, paper_md = io.read_text(readme_path), io.read_text(paper_path)
    updated = updated_readme(readme, paper_md)
    if check:
        if updated != readme:
            print("README.md's results differ from docs/paper.md's scorecard: run "
                  "python -m albert.paper readme", file=sys.stderr)
            return 1
        return 0
    if updated != readme:
        io.write_text_atomically(readme_path, updated)
        print(f"Wrote {readme_path}")
    return 0
