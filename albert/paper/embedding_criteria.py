"""The pre-registered criteria of Table 3 (embedding size E), from its runs.

`python -m albert.paper criteria --table=3 --output_dir=<the runs' reproduction>` judges
criteria (a)–(d) of docs/paper.md exactly as written there, on the held-out masked-LM accuracy
of the cells E ∈ {64, 128, 256, 768} × {not-shared, all-shared} (the paper's E; at the `cpu`
scale E ÷ 6). The E=64, 128 and 256 cells have `--seeds` seeds (2); the E=768 cells are Table
4's runs, with its 3 seeds (or `--seeds`, if more). A seed's own difference compares only cells
that have that seed (seed 3 only E=768 ones), so (d) rests on seeds 1 and 2.

(a) not-shared gains with E: each of NS128 − NS64, NS256 − NS128, NS768 − NS256 has a
one-sided lower bound above 0. (b) all-shared peaks at E=128: each of AS128 − AS64,
AS128 − AS256, AS128 − AS768 has one; its outcome names the E of the highest pooled all-shared
accuracy. (c) E matters less when all-shared: (NS768 − NS64) − (AS768 − AS64), one-sided lower
bound above 0. (d) every seed's own difference has its pooled difference's sign, for each of
(a)–(c)'s seven differences. The numbers, the bootstrap and partial judgements are
albert.paper.difference_criteria's (as Table 4's).
"""

from typing import Dict, List, Optional

import numpy as np

from albert.evaluation.document_bootstrap import RESAMPLES
from albert.paper import difference_criteria as shared
from albert.paper.difference_criteria import Difference
from albert.paper.sharing_criteria import SEEDS as TABLE4_SEEDS
from albert.paper.tables import TABLES

NONE, ALL = "not-shared", "all-shared"
EMBEDDINGS = ("64", "128", "256", "768")
LARGE_E, PEAK_E = "768", "128"
SEEDS = 2             # per E=64, 128 and 256 cell; the E=768 cells are Table 4's runs
FINAL_STEP = 6000


def label(strategy: str, embedding: str) -> str:
    """A cell's label in Table 3, e.g. 'sharing=all-shared, E=128'."""
    return f"sharing={strategy}, E={embedding}"


def _across(strategy: str, first: str, second: str,
            criterion: Optional[str] = None) -> Difference:
    """One strategy's E=first − E=second."""
    return Difference(f"{strategy}: E={first} − E={second}",
                      ((label(strategy, first), 1), (label(strategy, second), -1)), criterion)


def _sharing_cost(embedding: str) -> Difference:
    return Difference(f"E={embedding}: {NONE} − {ALL}",
                      ((label(NONE, embedding), 1), (label(ALL, embedding), -1)))


CRITERIA = {
    "a": ("not-shared gains with E",
          [_across(NONE, larger, smaller, "a")
           for smaller, larger in zip(EMBEDDINGS, EMBEDDINGS[1:])]),
    "b": ("all-shared peaks at E=128",
          [_across(ALL, PEAK_E, other, "b") for other in EMBEDDINGS if other != PEAK_E]),
    "c": ("E matters less when all-shared (the paper's \"nearly flat\")",
          [Difference(f"E={LARGE_E} − E=64: {NONE} − {ALL}",
                      ((label(NONE, LARGE_E), 1), (label(NONE, "64"), -1),
                       (label(ALL, LARGE_E), -1), (label(ALL, "64"), 1)), "c")]),
}
# Reported beside the criteria, not judged: all-shared's remaining neighbours, the two halves
# of (c), and the cost of sharing at each E.
DESCRIPTIVE = [_across(ALL, LARGE_E, "256"), _across(NONE, LARGE_E, "64"),
               _across(ALL, LARGE_E, "64"), *[_sharing_cost(embedding) for embedding in EMBEDDINGS]]


class Runs(shared.Runs):
    """Every pre-registered Table 3 run's counts."""

    def __init__(self, output_dir: str, seeds: int = SEEDS, final_step: int = FINAL_STEP):
        self.seeds = {f"E={embedding}": max(seeds, TABLE4_SEEDS) if embedding == LARGE_E
                      else seeds for embedding in EMBEDDINGS}
        super().__init__(output_dir, final_step,
                         {cell.label: (cell.run_name,
                                       range(1, self.seeds[f"E={dict(cell.keys)['E']}"] + 1))
                          for cell in TABLES[3].cells}, "Table 3")


def _difference_numbers(entry: dict) -> dict:
    return {"difference": entry["difference"], **shared.numbers(entry)}


def _peak(runs: Runs) -> Optional[str]:
    """The E of the highest pooled all-shared accuracy (None until every all-shared cell has
    a run)."""
    cells = [label(ALL, embedding) for embedding in EMBEDDINGS]
    if any(not runs.present(cell) for cell in cells):
        return None
    return f"E={EMBEDDINGS[int(np.argmax([runs.pooled(cell) for cell in cells]))]}"


def _criterion(text: str, entries: List[dict], peak: Optional[str] = None) -> dict:
    """A criterion on several differences: passes when each one's one-sided lower bound is
    above 0; "not yet judged", with provisional numbers, while a run is missing."""
    judged = {"criterion": text, "differences": [entry["difference"] for entry in entries],
              "runs": list(dict.fromkeys(name for entry in entries for name in entry["runs"]))}
    found = {"numbers": [_difference_numbers(entry) for entry in entries
                         if entry["value"] is not None]}
    if peak is not None:
        found["peak"] = peak
    missing = list(dict.fromkeys(name for entry in entries for name in entry["missing"]))
    if missing:
        judged.update(status="not yet judged", passes=None, missing=missing)
        if found["numbers"] or peak is not None:
            judged["provisional"] = found
        return judged
    for numbers, entry in zip(found["numbers"], entries):
        numbers["passes"] = entry["one_sided_lower95"] > 0
    judged.update(status="judged", **found)
    if peak is not None:
        judged["outcome"] = f"peak at {peak}"
    judged["passes"] = all(numbers["passes"] for numbers in found["numbers"])
    return judged


def _agreement_key(entry: dict) -> str:
    return f"({entry['criterion']}) {entry['difference']}"


def judge(runs: Runs, resamples: int = RESAMPLES) -> dict:
    """Criteria (a)–(d) as written before the runs, every number they rest on, every cell's
    accuracy and the descriptive differences; provisional where runs are missing."""
    draws = shared.cell_draws(runs, resamples)
    judged = {key: [shared.difference_entry(difference, runs, draws) for difference in listed]
              for key, (_, listed) in CRITERIA.items()}
    descriptive = [shared.difference_entry(difference, runs, draws) for difference in DESCRIPTIVE]
    criteria = {key: _criterion(text, judged[key], _peak(runs) if key == "b" else None)
                for key, (text, _) in CRITERIA.items()}
    criteria["d"] = shared.seeds_agree(
        "every seed agrees: each seed's own difference has the pooled difference's sign",
        [entry for key in CRITERIA for entry in judged[key]], runs.missing, _agreement_key)
    differing = shared.held_out_sets_warning(runs)
    cells = {}
    for cell, cell_draws in draws.items():
        cells[cell] = shared.cell_entry(runs, cell, cell_draws)
        # The E the runs trained with (the scale's, e.g. E ÷ 6 at `cpu`), for the plot.
        trained = {runs.configs[cell, seed].get("embedding_size") for seed in runs.present(cell)}
        cells[cell]["trained_embedding_size"] = trained.pop() if len(trained) == 1 else None
    result = {"table": 3, "final_step": runs.final_step, "seeds": runs.seeds,
              "resamples": resamples, "bootstrap_seed": shared.BOOTSTRAP_SEED,
              "complete": not runs.missing, "missing_runs": runs.missing,
              "criteria": criteria, "cells": cells,
              "differences": [entry for entries in judged.values() for entry in entries
                              if entry["value"] is not None]
              + [entry for entry in descriptive if entry["value"] is not None]}
    if differing:
        result["held_out_sets_differ"] = differing
    return result


def _criterion_numbers(key: str, entry: dict) -> str:
    return _agreement_text(entry) if key == "d" else _differences_text(entry)


def _differences_text(entry: dict) -> str:
    listed = entry.get("numbers") if entry["passes"] is not None else (
        entry.get("provisional", {}).get("numbers"))
    if not listed:
        return shared.NO_NUMBER
    texts = [f"{numbers['difference']}: {shared.numbers_text(numbers)}"
             + (" (lower bound not above 0)" if numbers.get("passes") is False else "")
             for numbers in listed]
    peak = entry.get("provisional", {}).get("peak") if entry["passes"] is None else None
    if peak:
        texts.append(f"highest all-shared accuracy at {peak}")
    return shared.provisional_text(entry, "; ".join(texts))


def _agreement_text(entry: dict) -> str:
    agree = entry.get("agree", entry.get("provisional", {}).get("agree", {}))
    if not agree:
        return shared.NO_NUMBER
    disagree = [name for name, value in agree.items() if not value]
    text = (f"{len(agree) - len(disagree)} of {len(agree)} differences agree"
            + "".join(f"; disagrees: {name}" for name in disagree))
    return shared.provisional_text(entry, text)


def format_markdown(result: dict) -> str:
    seeds = result["seeds"]
    lines = shared.criteria_lines(
        result, "criteria of Table 3 (embedding size E)",
        f"{shared.seeds_text(seeds['E=64'])} per E=64, 128 and 256 cell, "
        f"{seeds[f'E={LARGE_E}']} per E={LARGE_E} cell",
        "signed so that the paper's claim is positive; a seed's own difference compares only "
        "cells that have that seed", _criterion_numbers)
    lines += ["", *shared.cells_table(result["cells"]), "",
              *shared.differences_table(result["differences"]), *shared.held_out_lines(result)]
    return "\n".join(lines) + "\n"


def plot(result: dict, path: str) -> None:
    """Left: each strategy's accuracy against E (pooled over seeds, 95 % interval; each seed a
    dot). Right: every difference with its interval and each seed's."""
    plt = shared.pyplot()
    entries = result["differences"]
    figure, (curves, differences) = plt.subplots(
        1, 2, figsize=(14, max(5.0, 0.42 * len(entries) + 1.6)),
        gridspec_kw={"width_ratios": [1, 1.3]})
    ticks: Dict[int, str] = {}
    for strategy, colour, shift in ((NONE, "tab:blue", 0.97), (ALL, "tab:orange", 1.03)):
        found = [(int(embedding), result["cells"][label(strategy, embedding)])
                 for embedding in EMBEDDINGS if label(strategy, embedding) in result["cells"]]
        if not found:
            continue
        sizes = [size for size, _ in found]
        means = [100 * cell["accuracy"] for _, cell in found]
        lows = [mean - 100 * cell["ci95"][0] for mean, (_, cell) in zip(means, found)]
        highs = [100 * cell["ci95"][1] - mean for mean, (_, cell) in zip(means, found)]
        curves.errorbar([size * shift for size in sizes], means, yerr=[lows, highs], fmt="o-",
                        color=colour, capsize=3, label=f"{strategy}, seeds pooled, 95 % interval")
        for size, cell in found:
            seeds = [100 * value for value in cell["seed_accuracies"].values()]
            curves.scatter([size * shift * 1.04] * len(seeds), seeds, s=12, color=colour,
                           alpha=0.6, zorder=3)
            trained = cell.get("trained_embedding_size")
            if trained and trained != size:
                ticks[size] = f"{size}\n(trained {trained})"
    curves.scatter([], [], s=12, color="grey", alpha=0.6, label="each seed")
    curves.set_xscale("log", base=2)
    sizes = [int(embedding) for embedding in EMBEDDINGS]
    curves.set_xticks(sizes, [ticks.get(size, str(size)) for size in sizes], fontsize=8)
    curves.minorticks_off()
    curves.set_xlabel("embedding size E (the paper's)", fontsize=8)
    curves.set_ylabel("held-out MLM accuracy (%)", fontsize=8)
    curves.legend(fontsize=7)
    curves.grid(alpha=0.3)
    shared.draw_differences(differences, entries)
    differences.legend(fontsize=7, loc="best")
    seeds = ", ".join(f"{count} at {embedding}" for embedding, count in result["seeds"].items())
    title = f"Table 3, step {result['final_step']:,}, seeds per cell: {seeds}"
    if result["missing_runs"]:
        title += f"\npartial: {len(result['missing_runs'])} runs missing"
    figure.suptitle(title, fontsize=9)
    shared.save_figure(plt, figure, path)


def judge_command(args) -> int:
    """`python -m albert.paper criteria --table=3`: --seeds (default 2) is the E=64, 128 and
    256 cells' seed count, --final_step (default 6000) the runs' last step."""
    return shared.seeded_judge_command(args, "Table 3", SEEDS, FINAL_STEP, Runs, judge,
                                       format_markdown, plot)
