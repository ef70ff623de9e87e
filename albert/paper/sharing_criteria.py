"""The pre-registered criteria of the multi-seed Table 4 (cross-layer sharing), from its runs.

`python -m albert.paper criteria --table=4 --output_dir=<the runs' reproduction> --seeds=3`
judges criteria (a)–(d) of docs/paper.md exactly as written there. Each criterion is a
difference of cells' held-out masked-LM accuracies, signed so that the paper's claim is
positive; a cell's accuracy is the mean over its seeds (the E=768 cells' `--seeds`, the E=128
cells' one). Its interval comes from one set of document-bootstrap draws for every cell
(`albert.evaluation.document_bootstrap`): the held-out documents are drawn once per resample
for all cells (paired), each several-seed cell's seeds on their own.

The counts are the per-document masked tokens and correct predictions that each finished
run's `result.json` recorded from its final checkpoint; reading them, the bootstrap, partial
judgements and writing are albert.paper.difference_criteria's, shared with Table 3 and the
dropout runs.
"""


from typing import List, Optional

from albert.evaluation.document_bootstrap import RESAMPLES
from albert.paper import difference_criteria as shared
from albert.paper.difference_criteria import (Difference, check_outputs, markdown_path, outcome,
                                              run_label)
from albert.paper.tables import TABLES

LARGE_E, SMALL_E = "768", "128"   # the table's own E (at the cpu scale: 128 and 21)
ALL, ATTENTION, FFN, NONE = "all-shared", "shared-attention", "shared-FFN", "not-shared"
# The cells each E's runs train (pre-registered): E=128 shared-attention is not run.
DESIGN = {LARGE_E: (ALL, ATTENTION, FFN, NONE), SMALL_E: (ALL, FFN, NONE)}
SMALL_E_SEEDS = 1
FINAL_STEP = 6000
SEEDS = 3

__all__ = ["ALL", "ATTENTION", "FFN", "NONE", "NO_ORDER", "PAPERS_ORDER", "REVERSE", "Difference",
           "Runs", "check_outputs", "format_markdown", "judge", "label", "markdown_path",
           "outcome", "plot", "run_label", "write"]


def label(embedding: str, strategy: str) -> str:
    """A cell's label in Table 4, e.g. 'E=768, strategy=all-shared'."""
    return f"E={embedding}, strategy={strategy}"


def _embedding(cell_label: str) -> str:
    return cell_label.split(",")[0].split("=")[1]


def _pair(embedding: str, first: str, second: str, criterion: Optional[str] = None) -> Difference:
    return Difference(f"E={embedding}: {first} − {second}",
                      ((label(embedding, first), 1), (label(embedding, second), -1)), criterion)


CRITERIA = {
    "a": ("sharing everything costs MLM accuracy at E=768", _pair(LARGE_E, NONE, ALL, "a")),
    "b": ("it costs more at E=768 than at E=128",
          Difference(f"{NONE} − {ALL}: E={LARGE_E} − E={SMALL_E}",
                     ((label(LARGE_E, NONE), 1), (label(LARGE_E, ALL), -1),
                      (label(SMALL_E, NONE), -1), (label(SMALL_E, ALL), 1)), "b")),
    "c": ("the paper's sub-block order at E=768: sharing the FFN costs more than sharing "
          "attention", _pair(LARGE_E, ATTENTION, FFN, "c")),
}
# (c)'s outcomes: the interval above 0, below 0, or containing it.
PAPERS_ORDER, REVERSE, NO_ORDER = "the paper's order", "the reverse", "no order"
_PAIRS = ((NONE, ALL), (ATTENTION, ALL), (FFN, ALL), (NONE, ATTENTION), (NONE, FFN),
          (ATTENTION, FFN))


def _descriptive() -> List[Difference]:
    """Reported beside the criteria, not judged: the other differences of two strategies at
    one E, and each strategy's E=768 − E=128."""
    judged = {difference.terms for _, difference in CRITERIA.values()}
    at_one_e = [_pair(embedding, first, second) for embedding, strategies in DESIGN.items()
                for first, second in _PAIRS if {first, second} <= set(strategies)]
    across_e = [Difference(f"{strategy}: E={LARGE_E} − E={SMALL_E}",
                           ((label(LARGE_E, strategy), 1), (label(SMALL_E, strategy), -1)))
                for strategy in DESIGN[SMALL_E]]
    return [difference for difference in at_one_e if difference.terms not in judged] + across_e


DESCRIPTIVE = _descriptive()


class Runs(shared.Runs):
    """Every pre-registered Table 4 run's counts: `seeds` per E=768 cell, one per E=128 cell."""

    def __init__(self, output_dir: str, seeds: int = SEEDS, final_step: int = FINAL_STEP):
        self.seeds = seeds
        design = {label(embedding, strategy): range(1, (seeds if embedding == LARGE_E
                                                         else SMALL_E_SEEDS) + 1)
                  for embedding, strategies in DESIGN.items() for strategy in strategies}
        super().__init__(output_dir, final_step,
                         {cell.label: (cell.run_name, design[cell.label])
                          for cell in TABLES[4].cells if cell.label in design}, "Table 4")

    def seed_run(self, cell: str, seed: int) -> int:
        """The run of `cell` that stands for seed `seed` of the table: the E=128 cells' one seed
        stands for every seed."""
        return seed if _embedding(cell) == LARGE_E else 1


def judge(runs: Runs, resamples: int = RESAMPLES) -> dict:
    """Criteria (a)–(d) as written before the runs, every number they rest on, every cell's
    accuracy and the descriptive differences; provisional where runs are missing."""
    draws = shared.cell_draws(runs, resamples)
    differences = [shared.difference_entry(difference, runs, draws)
                   for difference in [CRITERIA["a"][1], CRITERIA["b"][1], CRITERIA["c"][1],
                                      *DESCRIPTIVE]]
    by_criterion = {entry["criterion"]: entry for entry in differences if entry["criterion"]}
    criteria = {key: shared.criterion_entry(text, by_criterion[key],
                                            _order if key == "c" else
                                            shared.lower_bound_above_zero)
                for key, (text, _) in CRITERIA.items()}
    criteria["d"] = shared.seeds_agree("every seed agrees in sign with its pooled difference",
                                       [by_criterion[key] for key in CRITERIA], runs.missing,
                                       key=lambda entry: entry["criterion"])
    differing = shared.held_out_sets_warning(runs)
    result = {"table": 4, "final_step": runs.final_step,
              "seeds": {f"E={LARGE_E}": runs.seeds, f"E={SMALL_E}": SMALL_E_SEEDS},
              "resamples": resamples, "bootstrap_seed": shared.BOOTSTRAP_SEED,
              "complete": not runs.missing, "missing_runs": runs.missing,
              "criteria": criteria,
              "cells": {cell: shared.cell_entry(runs, cell, cell_draws)
                        for cell, cell_draws in draws.items()},
              "differences": [entry for entry in differences if entry.get("value") is not None]}
    if differing:
        result["held_out_sets_differ"] = differing
    return result


def _order(entry: dict) -> dict:
    """(c) is two-sided: either order is a finding, and only the paper's passes."""
    low, high = entry["ci95"]
    found = PAPERS_ORDER if low > 0 else REVERSE if high < 0 else NO_ORDER
    return {"outcome": found, "passes": found == PAPERS_ORDER}


def _criterion_numbers(key: str, entry: dict) -> str:
    if key == "d":
        agree = entry.get("agree", entry.get("provisional", {}).get("agree", {}))
        text = ", ".join(f"({name}) {'agree' if value else 'disagree'}"
                         for name, value in agree.items())
    elif "value" in entry:
        text = f"{entry['difference']}: {shared.numbers_text(entry)}"
    elif "provisional" in entry:
        text = f"{entry['difference']}: {shared.numbers_text(entry['provisional'])}"
    else:
        return shared.NO_NUMBER
    return shared.provisional_text(entry, text)


def format_markdown(result: dict) -> str:
    seeds = result["seeds"]
    lines = shared.criteria_lines(
        result, "criteria of the multi-seed Table 4",
        f"{shared.seeds_text(seeds[f'E={LARGE_E}'])} per E={LARGE_E} cell, "
        f"{seeds[f'E={SMALL_E}']} per E={SMALL_E} cell",
        "signed so that the paper's claim is positive", _criterion_numbers)
    lines += ["", *shared.cells_table(result["cells"]), "",
              *shared.differences_table(result["differences"]), *shared.held_out_lines(result)]
    return "\n".join(lines) + "\n"


def plot(result: dict, path: str) -> None:
    """Every difference with its interval and each seed's (shared.draw_differences)."""
    seeds = result["seeds"]
    shared.plot_differences(
        result, path,
        f"Table 4, step {result['final_step']:,}, {shared.seeds_text(seeds[f'E={LARGE_E}'])} "
        f"per E={LARGE_E} cell, {seeds[f'E={SMALL_E}']} per E={SMALL_E} cell")


def write(result: dict, output: str, plot_path: Optional[str]) -> List[str]:
    return shared.write(result, output, plot_path, format_markdown, plot)
