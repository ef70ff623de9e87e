"""The pre-registered criteria of Table 11 (depth at a fixed parameter count), from its runs.

`python -m albert.paper criteria --table=11 --output_dir=<the runs' reproduction>` judges
criteria (a)–(e) of docs/paper.md as written there, on the held-out masked-LM accuracy A_d of
the all-shared model of Table 4's E=768 cell at d = 1, 2, 4, 8 and 12 layers (`reproduce
--layers` = 3, 6, 12, 24, 36 at paper size; the 4-layer runs are Table 4's), 3 seeds a depth.

(a) deeper is better up to 8 layers: A2 − A1, A4 − A2 and A8 − A4 each have a one-sided lower
bound above 0. (b) the gains shrink: (A2 − A1) − (A8 − A4). (c) depth levels off:
(A8 − A4) − (A12 − A8); each of (b) and (c) passes with a one-sided lower bound above 0. (d) the
parameter count does not grow: every finished run's counted parameters are one number. (e)
every seed's own difference has its pooled difference's sign, for each difference of (a)–(c).
The bootstrap, partial judgements and writing are albert.paper.difference_criteria's (as
Tables 3 and 4).
"""

import os
from typing import List

from albert import io
from albert.evaluation.document_bootstrap import RESAMPLES
from albert.paper import difference_criteria as shared
from albert.paper.difference_criteria import Difference
from albert.paper.reproduce import RESULT
from albert.paper.tables import TABLES

DEPTHS = (1, 2, 4, 8, 12)          # layers at the cpu scale
PAPER_LAYERS = {1: 3, 2: 6, 4: 12, 8: 24, 12: 36}  # --layers at paper size
CELL = "E=768, strategy=all-shared"  # Table 4's cell, trained at each depth
SEEDS = 3
FINAL_STEP = 6000


def label(depth: int) -> str:
    return f"layers={depth}"


def run_name(depth: int) -> str:
    """The run directory `reproduce --layers` writes for a depth (4 layers: Table 4's run)."""
    cell = next(cell for cell in TABLES[4].cells if cell.label == CELL)
    return cell.run_name.replace("-L12-", f"-L{PAPER_LAYERS[depth]}-")


def _gain(deeper: int, shallower: int, criterion=None) -> Difference:
    return Difference(f"A{deeper} − A{shallower}",
                      ((label(deeper), 1), (label(shallower), -1)), criterion)


def _gain_difference(first: tuple, second: tuple, criterion: str) -> Difference:
    """(A_first[0] − A_first[1]) − (A_second[0] − A_second[1])."""
    (a, b), (c, d) = first, second
    return Difference(f"(A{a} − A{b}) − (A{c} − A{d})",
                      ((label(a), 1), (label(b), -1), (label(c), -1), (label(d), 1)), criterion)


CRITERIA = {
    "a": ("deeper is better up to 8 layers", [_gain(2, 1, "a"), _gain(4, 2, "a"),
                                              _gain(8, 4, "a")]),
    "b": ("the gains shrink (the first doubling gains more than the last)",
          [_gain_difference((2, 1), (8, 4), "b")]),
    "c": ("depth levels off (8 to 12 layers gains less than 4 to 8)",
          [_gain_difference((8, 4), (12, 8), "c")]),
}
DESCRIPTIVE = [_gain(12, 8), _gain(12, 1)]


class Runs(shared.Runs):
    """Every pre-registered Table 11 run's counts and parameter count."""

    def __init__(self, output_dir: str, seeds: int = SEEDS, final_step: int = FINAL_STEP):
        self.seeds = seeds
        super().__init__(output_dir, final_step,
                         {label(depth): (run_name(depth), range(1, seeds + 1))
                          for depth in DEPTHS}, "Table 11")
        self.parameters = {shared.run_label(cell, seed): io.read_json(
            os.path.join(self.directory(cell, seed), RESULT))["parameters"]
            for cell, seed in self.found}


def _all_lower_bounds_above_zero(text: str, entries: List[dict]) -> dict:
    """A criterion on several differences: each one's one-sided lower bound above 0."""
    judged = [shared.criterion_entry(text, entry) for entry in entries]
    missing = [name for entry in judged for name in entry.get("missing", [])]
    result = {"criterion": text, "differences": judged,
              "runs": list(dict.fromkeys(name for entry in entries for name in entry["runs"]))}
    if missing:
        result.update(status="not yet judged", passes=None, missing=list(dict.fromkeys(missing)))
    else:
        result.update(status="judged", passes=all(entry["passes"] for entry in judged))
    return result


def _same_parameters(runs: Runs) -> dict:
    counts = sorted(set(runs.parameters.values()))
    entry = {"criterion": "the parameter count does not grow", "parameters": runs.parameters}
    if runs.missing:
        entry.update(status="not yet judged", passes=None, missing=runs.missing,
                     provisional={"distinct_counts": counts})
    else:
        entry.update(status="judged", distinct_counts=counts, passes=len(counts) == 1)
    return entry


def judge(runs: Runs, resamples: int = RESAMPLES) -> dict:
    draws = shared.cell_draws(runs, resamples)
    judged = {key: [shared.difference_entry(difference, runs, draws) for difference in listed]
              for key, (_, listed) in CRITERIA.items()}
    criteria = {key: _all_lower_bounds_above_zero(CRITERIA[key][0], entries)
                for key, entries in judged.items()}
    criteria["d"] = _same_parameters(runs)
    criteria["e"] = shared.seeds_agree("every seed agrees",
                                       [entry for entries in judged.values() for entry in entries],
                                       runs.missing, key=lambda entry: entry["difference"])
    differences = [entry for entries in judged.values() for entry in entries] + [
        shared.difference_entry(difference, runs, draws) for difference in DESCRIPTIVE]
    result = {"table": 11, "final_step": runs.final_step, "seeds": runs.seeds,
              "resamples": resamples, "bootstrap_seed": shared.BOOTSTRAP_SEED,
              "complete": not runs.missing, "missing_runs": runs.missing, "criteria": criteria,
              "cells": {cell: shared.cell_entry(runs, cell, cell_draws)
                        for cell, cell_draws in draws.items()},
              "differences": [entry for entry in differences if entry.get("value") is not None]}
    differing = shared.held_out_sets_warning(runs)
    if differing:
        result["held_out_sets_differ"] = differing
    return result


def _criterion_numbers(key: str, entry: dict) -> str:
    if key == "d":
        counts = entry.get("distinct_counts", entry.get("provisional", {}).get("distinct_counts"))
        text = f"counted parameters: {', '.join(f'{count:,}' for count in counts)}"
    elif key == "e":
        agree = entry.get("agree", entry.get("provisional", {}).get("agree", {}))
        text = ", ".join(f"{name} {'agree' if value else 'disagree'}"
                         for name, value in agree.items())
    else:
        parts = [f"{part['difference']}: {shared.numbers_text(part)}" if "value" in part else
                 f"{part['difference']}: {shared.numbers_text(part['provisional'])}"
                 for part in entry["differences"] if "value" in part or "provisional" in part]
        text = "; ".join(parts) or shared.NO_NUMBER
    return shared.provisional_text(entry, text)


def format_markdown(result: dict) -> str:
    lines = shared.criteria_lines(result, "criteria of Table 11 (depth)",
                                  f"{shared.seeds_text(result['seeds'])} per depth",
                                  "signed so that the paper's claim is positive",
                                  _criterion_numbers)
    lines += ["", *shared.cells_table(result["cells"]), "",
              *shared.differences_table(result["differences"]), *shared.held_out_lines(result)]
    return "\n".join(lines) + "\n"


def plot(result: dict, path: str) -> None:
    shared.plot_differences(
        result, path,
        f"Table 11, step {result['final_step']:,}, {shared.seeds_text(result['seeds'])} per depth")


def judge_command(args) -> int:
    """`python -m albert.paper criteria --table=11`: --seeds (default 3) per depth,
    --final_step (default 6000)."""
    return shared.seeded_judge_command(args, "Table 11", SEEDS, FINAL_STEP, Runs, judge,
                                       format_markdown, plot)
