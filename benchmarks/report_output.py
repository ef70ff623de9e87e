"""How the benchmarks hand over their report: printed as JSON, and written to `--output`."""

import json
import os


def print_and_write(report: dict, output=None) -> None:
    """Prints `report` as indented JSON and, with `output`, writes the same text there
    (its directory created)."""
    text = json.dumps(report, indent=2)
    print(text)
    if output:
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
