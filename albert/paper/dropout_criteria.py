"""The pre-registered dropout criteria (the paper's Table 8 and Figure 2b), from their runs.

`python -m albert.paper criteria --table=8 --output_dir=<the runs' reproduction>` judges
criteria (a)–(c) of docs/paper.md exactly as written there, on Table 4's E=768 all-shared
model trained with dropout 0.1 (Table 4's own runs) and without dropout (`reproduce --table=4
--dropout=0`), `--seeds` seeds each (3), seed k of both with the same `--random_seed`:

(a) removing dropout raises held-out MLM accuracy at the end: no-dropout − dropout at
--final_step, from the runs' per-document counts (albert.paper.difference_criteria, as Table
4), one-sided lower bound above 0; (b) and through training: at every held-out evaluation from
2,000 steps to the final one, every 1,000 steps (each run's `pretraining/eval_results.json`;
an extra evaluation where a run was stopped and resumed is left out), the mean over seeds
of no-dropout − dropout is above 0 (these evaluations have no per-document counts, so no
interval); (c) every seed agrees: (a)'s difference is above 0 in each seed.
"""

import dataclasses
import os
from typing import Dict, List

import numpy as np

from albert import io
from albert.errors import InputError
from albert.evaluation.document_bootstrap import RESAMPLES
from albert.paper import difference_criteria as shared
from albert.paper.difference_criteria import Difference, run_label
from albert.paper.tables import TABLES
from albert.training.run_directory import EVAL_JSON

SEEDS = 3
FINAL_STEP = 6000
FIRST_STEP = 2000     # (b): the evaluations from this step on
# The runs' --save_checkpoints_steps: each evaluates its checkpoint every this many steps.
EVALUATION_INTERVAL = 1000
WITH_DROPOUT, WITHOUT_DROPOUT = 0.1, 0.0
MODEL = "E=768, strategy=all-shared"   # Table 4's cell


def label(dropout: float) -> str:
    """A cell's label, e.g. 'E=768, strategy=all-shared, dropout=0'."""
    return f"{MODEL}, dropout={dropout:g}"


WITH, WITHOUT = label(WITH_DROPOUT), label(WITHOUT_DROPOUT)
FINAL = Difference("without dropout − with dropout (0.1)", ((WITHOUT, 1), (WITH, -1)), "a")
CRITERIA = {"a": "removing dropout raises held-out MLM accuracy at the end",
            "b": "and through training",
            "c": "every seed agrees: (a)'s difference is above 0 in each seed"}


class Runs(shared.Runs):
    """Both cells' runs: counts from result.json, and each finished run's held-out masked-LM
    accuracy at every evaluation (`curves`: {(cell, seed): {step: accuracy}})."""

    def __init__(self, output_dir: str, seeds: int = SEEDS, final_step: int = FINAL_STEP):
        self.seeds = seeds
        cell = {found.label: found for found in TABLES[4].cells}[MODEL]
        super().__init__(output_dir, final_step,
                         {label(dropout): (dataclasses.replace(cell, dropout=dropout).run_name,
                                           range(1, seeds + 1))
                          for dropout in (WITH_DROPOUT, WITHOUT_DROPOUT)}, "dropout")
        self.curves = {key: self._curve(*key) for key in self.found}
        # (b)'s evaluations are the scheduled ones; a run stopped and resumed also has one
        # at the step it stopped at, which the other runs lack and which is left out.
        steps = sorted({step for curve in self.curves.values() for step in curve
                        if FIRST_STEP <= step <= final_step
                        and step % EVALUATION_INTERVAL == 0})
        for (cell_label, seed), curve in self.curves.items():
            absent = [step for step in steps if step not in curve]
            if absent:
                raise InputError(f"{self._journal(cell_label, seed)} has no evaluation at step "
                                 f"{absent[0]}, which the other runs have: criterion (b) "
                                 "compares the runs at every evaluation")
        self.steps = steps

    def _journal(self, cell: str, seed: int) -> str:
        return os.path.join(self.directory(cell, seed), "pretraining", EVAL_JSON)

    def _curve(self, cell: str, seed: int) -> Dict[int, float]:
        path = self._journal(cell, seed)
        if not io.exists(path):
            raise InputError(f"{path} does not exist: criterion (b) needs every finished run's "
                             "held-out evaluations")
        curve = {int(entry["step"]): float(entry["masked_lm_accuracy"])
                 for entry in io.read_json(path).get("evaluations", [])
                 if "masked_lm_accuracy" in entry}
        if self.final_step not in curve:
            raise InputError(f"{path} has no held-out evaluation at --final_step="
                             f"{self.final_step}")
        return curve


def _paired_seeds(runs: Runs) -> List[int]:
    return [seed for seed in range(1, runs.seeds + 1)
            if (WITH, seed) in runs.found and (WITHOUT, seed) in runs.found]


def _through_training(runs: Runs) -> dict:
    """(b): at each evaluation from FIRST_STEP on, the mean over seeds of no-dropout − dropout."""
    judged = {"criterion": CRITERIA["b"], "steps": runs.steps,
              "runs": [run_label(cell, seed) for cell in (WITHOUT, WITH)
                       for seed in range(1, runs.seeds + 1)]}
    seeds = _paired_seeds(runs)
    per_seed = {str(seed): {str(step): runs.curves[WITHOUT, seed][step]
                            - runs.curves[WITH, seed][step] for step in runs.steps}
                for seed in seeds}
    found = {"mean_differences": {str(step): float(np.mean([values[str(step)] for values
                                                            in per_seed.values()]))
                                  for step in runs.steps} if seeds else {},
             "seed_differences": per_seed}
    missing = [name for name in runs.missing if name in judged["runs"]]
    if missing:
        judged.update(status="not yet judged", passes=None, missing=missing)
        if seeds:
            judged["provisional"] = found
        return judged
    judged.update(status="judged", **found)
    judged["passes"] = all(value > 0 for value in found["mean_differences"].values())
    return judged


def _every_seed(entry: dict, seeds: int) -> dict:
    """(c): (a)'s difference above 0 in every seed."""
    judged = {"criterion": CRITERIA["c"], "difference": entry["difference"],
              "runs": entry["runs"]}
    found = {"seed_differences": entry.get("seed_differences", {})}
    if entry["missing"]:
        judged.update(status="not yet judged", passes=None, missing=entry["missing"])
        if found["seed_differences"]:
            judged["provisional"] = found
        return judged
    judged.update(status="judged", **found)
    judged["passes"] = (sorted(found["seed_differences"]) == sorted(map(str, range(1, seeds + 1)))
                        and all(value > 0 for value in found["seed_differences"].values()))
    return judged


def judge(runs: Runs, resamples: int = RESAMPLES) -> dict:
    """Criteria (a)–(c) as written before the runs, every number they rest on, both cells'
    accuracies and every run's evaluations; provisional where runs are missing."""
    draws = shared.cell_draws(runs, resamples)
    final = shared.difference_entry(FINAL, runs, draws)
    criteria = {"a": shared.criterion_entry(CRITERIA["a"], final),
                "b": _through_training(runs),
                "c": _every_seed(final, runs.seeds)}
    differing = shared.held_out_sets_warning(runs)
    result = {"table": 8, "final_step": runs.final_step, "first_step": FIRST_STEP,
              "seeds": runs.seeds, "resamples": resamples,
              "bootstrap_seed": shared.BOOTSTRAP_SEED,
              "complete": not runs.missing, "missing_runs": runs.missing,
              "criteria": criteria,
              "cells": {cell: shared.cell_entry(runs, cell, cell_draws)
                        for cell, cell_draws in draws.items()},
              "differences": [final] if final["value"] is not None else [],
              "evaluations": {run_label(cell, seed): {
                  "steps": sorted(runs.curves[cell, seed]),
                  "masked_lm_accuracy": [runs.curves[cell, seed][step]
                                         for step in sorted(runs.curves[cell, seed])]}
                  for cell, seed in runs.found}}
    if differing:
        result["held_out_sets_differ"] = differing
    return result


def _criterion_numbers(key: str, entry: dict) -> str:
    found = entry if entry["passes"] is not None else entry.get("provisional")
    if found is None:
        return shared.NO_NUMBER
    if key == "a":
        text = f"{entry['difference']}: {shared.numbers_text(found)}"
    elif key == "b":
        text = "mean over seeds " + ", ".join(
            f"step {int(step):,} {shared.points(value)}"
            for step, value in found["mean_differences"].items())
        if entry["passes"] is None:
            text += f" (seeds {', '.join(found['seed_differences'])})"
    else:
        text = shared.seed_points(found["seed_differences"])
    return shared.provisional_text(entry, text)


def format_markdown(result: dict) -> str:
    lines = shared.criteria_lines(
        result, f"dropout criteria (Table 8, Figure 2b) on {MODEL}",
        f"{shared.seeds_text(result['seeds'])} per cell", "without dropout − with dropout (0.1)",
        _criterion_numbers)
    lines += ["", *shared.cells_table(result["cells"])]
    if result["differences"]:
        lines += ["", *shared.differences_table(result["differences"])]
    lines += ["", "Held-out MLM accuracy at each evaluation (%, the runs' own evaluations during "
              "training; mean over the seeds finished):", "",
              "| step | with dropout | without dropout | without − with (mean over seeds, "
              "points) | each seed |", "|---|---|---|---|---|"]
    evaluations = result["evaluations"]
    for step in sorted({step for run in evaluations.values() for step in run["steps"]}):
        at = {}
        for cell in (WITH, WITHOUT):
            for seed in range(1, result["seeds"] + 1):
                run = evaluations.get(run_label(cell, seed))
                if run and step in run["steps"]:
                    at[cell, seed] = run["masked_lm_accuracy"][run["steps"].index(step)]
        means = [f"{100 * np.mean(values):.2f}" if values else "—" for values in
                 ([value for (cell, _), value in at.items() if cell == found]
                  for found in (WITH, WITHOUT))]
        seeds = {str(seed): at[WITHOUT, seed] - at[WITH, seed] for seed in
                 range(1, result["seeds"] + 1) if (WITH, seed) in at and (WITHOUT, seed) in at}
        mean = shared.points(np.mean(list(seeds.values()))) if seeds else "—"
        lines.append(f"| {step:,} | {means[0]} | {means[1]} | {mean} | "
                     f"{shared.seed_points(seeds)} |")
    lines += shared.held_out_lines(result)
    return "\n".join(lines) + "\n"


def plot(result: dict, path: str) -> None:
    """The paper's Figure 2b layout: held-out MLM accuracy against steps, each run a thin line
    and the mean over seeds a thick one, with and without dropout in two colours; beside it,
    no-dropout − dropout against steps (each seed thin, the mean thick) with the final
    checkpoint's pooled difference and its 95 % interval."""
    plt = shared.pyplot()
    figure, (curves, differences) = plt.subplots(1, 2, figsize=(13, 5))
    evaluations = result["evaluations"]
    paired = {}
    for cell, colour, name in ((WITH, "tab:blue", "with dropout (0.1)"),
                               (WITHOUT, "tab:red", "without dropout")):
        runs = {seed: evaluations[run_label(cell, seed)] for seed in range(1, result["seeds"] + 1)
                if run_label(cell, seed) in evaluations}
        for seed, run in runs.items():
            curves.plot(run["steps"], [100 * value for value in run["masked_lm_accuracy"]],
                        color=colour, linewidth=0.8, alpha=0.5,
                        label=f"{name}, each seed" if seed == min(runs) else None)
        if runs:
            steps = sorted(set.intersection(*(set(run["steps"]) for run in runs.values())))
            mean = [100 * np.mean([run["masked_lm_accuracy"][run["steps"].index(step)]
                                   for run in runs.values()]) for step in steps]
            curves.plot(steps, mean, color=colour, linewidth=2.5,
                        label=f"{name}, mean of {shared.seeds_text(len(runs))}")
        paired[cell] = runs
    curves.set_xlabel("training step", fontsize=8)
    curves.set_ylabel("held-out MLM accuracy (%)", fontsize=8)
    curves.legend(fontsize=7)
    curves.grid(alpha=0.3)
    seeds = sorted(set(paired[WITH]) & set(paired[WITHOUT]))
    per_seed = {}
    for seed in seeds:
        without, with_ = paired[WITHOUT][seed], paired[WITH][seed]
        steps = [step for step in without["steps"] if step in with_["steps"]]
        per_seed[seed] = dict(zip(steps, (
            100 * (without["masked_lm_accuracy"][without["steps"].index(step)]
                   - with_["masked_lm_accuracy"][with_["steps"].index(step)]) for step in steps)))
        differences.plot(steps, list(per_seed[seed].values()), color="grey", linewidth=0.8,
                         alpha=0.7, label="each seed" if seed == seeds[0] else None)
    if per_seed:
        steps = sorted(set.intersection(*(set(values) for values in per_seed.values())))
        differences.plot(steps, [np.mean([values[step] for values in per_seed.values()])
                                 for step in steps], color="black", linewidth=2.5,
                         label=f"mean over {shared.seeds_text(len(per_seed))}")
    else:
        differences.text(0.5, 0.5, "no seed has both runs finished yet", ha="center",
                         transform=differences.transAxes, fontsize=9, color="grey")
    differences.axvspan(result["first_step"], result["final_step"], color="tab:green",
                        alpha=0.06, label="(b): judged from here")
    if result["differences"]:
        final = result["differences"][0]
        value = 100 * final["value"]
        low, high = (100 * bound for bound in final["ci95"])
        colour = "grey" if final["provisional"] else "tab:purple"
        differences.errorbar(result["final_step"] * 1.02, value,
                             yerr=[[value - low], [high - value]], fmt="D", color=colour,
                             capsize=4, label="(a): final checkpoint, seeds pooled, 95 % "
                                              "document-bootstrap interval")
        seeds = [100 * seed for seed in final["seed_differences"].values()]
        differences.scatter([result["final_step"] * 1.035] * len(seeds), seeds, marker="x",
                            color="tab:red", zorder=3, label="(c): final checkpoint, each seed")
    differences.axhline(0, color="grey", linestyle=":", linewidth=1)
    differences.set_xlabel("training step", fontsize=8)
    differences.set_ylabel("without − with dropout (points of held-out MLM accuracy)",
                           fontsize=8)
    differences.legend(fontsize=7)
    differences.grid(alpha=0.3)
    title = (f"Dropout (Table 8, Figure 2b): {MODEL}, {shared.seeds_text(result['seeds'])} per "
             "cell")
    if result["missing_runs"]:
        title += f"\npartial: {len(result['missing_runs'])} runs missing"
    figure.suptitle(title, fontsize=9)
    shared.save_figure(plt, figure, path)


def _check_final_step(final_step: int) -> None:
    if final_step < FIRST_STEP:
        raise InputError(f"--final_step={final_step}: criterion (b) judges the evaluations from "
                         f"step {FIRST_STEP:,} on, so the runs must train beyond it")


def judge_command(args) -> int:
    """`python -m albert.paper criteria --table=8`: --seeds (default 3) per cell, --final_step
    (default 6000) the runs' last step."""
    return shared.seeded_judge_command(args, "the dropout runs", SEEDS, FINAL_STEP, Runs, judge,
                                       format_markdown, plot, _check_final_step)
