"""A design's criterion on the runs' own held-out evaluations during training (Table 8's (b)):
each finished run's `pretraining/eval_results.json`, the rule that judges them, their table in
criteria.md and the plot in the paper's Figure 2b layout.

These evaluations have no per-document counts, so no interval: the rule compares the mean over
seeds of treatment − baseline at every scheduled evaluation from `first_step` to the final
one. An extra evaluation where a run was stopped and resumed is left out.
"""

import os
from typing import Dict, List

import numpy as np

from albert import io
from albert.errors import InputError
from albert.paper import preregistrations as rules
from albert.paper.difference_report import (NO_NUMBER, points, provisional_text, pyplot,
                                            save_figure, seed_points, seeds_text)
from albert.paper.difference_runs import Runs, run_label
from albert.paper.difference_verdicts import Rule, shown_numbers, verdict
from albert.paper.preregistrations import Criterion, Design, TrainingCurves
from albert.training.run_directory import EVAL_JSON


def _key(design: Design) -> str:
    """The letter of the criterion on these evaluations, as errors name it."""
    return next(criterion.key for criterion in design.criteria
                if criterion.rule == rules.ABOVE_ZERO_THROUGH_TRAINING)


def check_final_step(design: Design, final_step: int) -> None:
    first = design.training_curves.first_step
    if final_step < first:
        raise InputError(f"--final_step={final_step}: criterion ({_key(design)}) judges the "
                         f"evaluations from step {first:,} on, so the runs must train beyond it")


def read_curves(design: Design, runs: Runs) -> None:
    """Each finished run's held-out masked-LM accuracy at every evaluation (`runs.curves`:
    {(cell, seed): {step: accuracy}}) and the scheduled steps the rule compares
    (`runs.steps`)."""
    curves = design.training_curves
    runs.curves = {key: _curve(design, runs, *key) for key in runs.found}
    # A run stopped and resumed also has an evaluation at the step it stopped at, which the
    # other runs lack and which is left out.
    steps = sorted({step for curve in runs.curves.values() for step in curve
                    if curves.first_step <= step <= runs.final_step
                    and step % curves.interval == 0})
    for (cell, seed), curve in runs.curves.items():
        absent = [step for step in steps if step not in curve]
        if absent:
            raise InputError(f"{_journal(runs, cell, seed)} has no evaluation at step "
                             f"{absent[0]}, which the other runs have: criterion "
                             f"({_key(design)}) compares the runs at every evaluation")
    runs.steps = steps


def _journal(runs: Runs, cell: str, seed: int) -> str:
    return os.path.join(runs.directory(cell, seed), "pretraining", EVAL_JSON)


def _curve(design: Design, runs: Runs, cell: str, seed: int) -> Dict[int, float]:
    path = _journal(runs, cell, seed)
    if not io.exists(path):
        raise InputError(f"{path} does not exist: criterion ({_key(design)}) needs every "
                         "finished run's held-out evaluations")
    curve = {int(entry["step"]): float(entry["masked_lm_accuracy"])
             for entry in io.read_json(path).get("evaluations", [])
             if "masked_lm_accuracy" in entry}
    if runs.final_step not in curve:
        raise InputError(f"{path} has no held-out evaluation at --final_step={runs.final_step}")
    return curve


def evaluations(runs: Runs) -> dict:
    """Every finished run's evaluations, as the judgement reports them."""
    return {run_label(cell, seed): {"steps": sorted(curve),
                                    "masked_lm_accuracy": [curve[step] for step in sorted(curve)]}
            for (cell, seed), curve in runs.curves.items()}


def _through_training(curves: TrainingCurves):
    """The rule: at each scheduled evaluation from first_step on, the mean over seeds of
    treatment − baseline above 0."""
    baseline, treatment = curves.baseline[0], curves.treatment[0]

    def judge(criterion: Criterion, entries: List[dict], runs: Runs) -> dict:
        judged = {"criterion": criterion.text, "steps": runs.steps,
                  "runs": [run_label(cell, seed) for cell in (treatment, baseline)
                           for seed in runs.design_seeds[cell]]}
        seeds = [seed for seed in runs.design_seeds[baseline]
                 if (baseline, seed) in runs.found and (treatment, seed) in runs.found]
        per_seed = {str(seed): {str(step): runs.curves[treatment, seed][step]
                                - runs.curves[baseline, seed][step] for step in runs.steps}
                    for seed in seeds}
        found = {"mean_differences": {str(step): float(np.mean([values[str(step)] for values
                                                                in per_seed.values()]))
                                      for step in runs.steps} if seeds else {},
                 "seed_differences": per_seed}
        return verdict(judged, [name for name in runs.missing if name in judged["runs"]],
                       seeds and found,
                       lambda: {"passes": all(value > 0
                                              for value in found["mean_differences"].values())})

    return judge


def _words(criterion: Criterion, entry: dict) -> str:
    found = shown_numbers(entry)
    if found is None:
        return NO_NUMBER
    text = "mean over seeds " + ", ".join(f"step {int(step):,} {points(value)}"
                                          for step, value in found["mean_differences"].items())
    if entry["passes"] is None:
        text += f" (seeds {', '.join(found['seed_differences'])})"
    return provisional_text(entry, text)


def rule(curves: TrainingCurves) -> Rule:
    return Rule(_through_training(curves), _words)


def _seeds(result: dict) -> range:
    """The seeds of the two cells, as the judgement's count says."""
    count = result["seeds"]
    return range(1, (count if isinstance(count, int) else max(count.values())) + 1)


def table(result: dict, curves: TrainingCurves) -> List[str]:
    """criteria.md's table of every evaluation: each cell's mean over its finished seeds,
    treatment − baseline (mean over seeds, and each seed's)."""
    baseline, treatment = curves.baseline[0], curves.treatment[0]
    lines = ["Held-out MLM accuracy at each evaluation (%, the runs' own evaluations during "
             "training; mean over the seeds finished):", "",
             f"| step | {' | '.join(curves.columns)} | each seed |", "|---|---|---|---|---|"]
    evaluations = result["evaluations"]
    for step in sorted({step for run in evaluations.values() for step in run["steps"]}):
        at = {}
        for cell in (baseline, treatment):
            for seed in _seeds(result):
                run = evaluations.get(run_label(cell, seed))
                if run and step in run["steps"]:
                    at[cell, seed] = run["masked_lm_accuracy"][run["steps"].index(step)]
        means = [f"{100 * np.mean(values):.2f}" if values else "—" for values in
                 ([value for (cell, _), value in at.items() if cell == found]
                  for found in (baseline, treatment))]
        seeds = {str(seed): at[treatment, seed] - at[baseline, seed] for seed in
                 _seeds(result) if (baseline, seed) in at and (treatment, seed) in at}
        mean = points(np.mean(list(seeds.values()))) if seeds else "—"
        lines.append(f"| {step:,} | {means[0]} | {means[1]} | {mean} | {seed_points(seeds)} |")
    return lines


def plot(result: dict, path: str, title: str, curves: TrainingCurves) -> None:
    """The paper's Figure 2b layout: held-out MLM accuracy against steps, each run a thin line
    and the mean over seeds a thick one, baseline and treatment in two colours; beside it,
    treatment − baseline against steps (each seed thin, the mean thick) with the final
    checkpoint's pooled difference and its 95 % interval."""
    plt = pyplot()
    figure, (axes, differences) = plt.subplots(1, 2, figsize=(13, 5))
    evaluations = result["evaluations"]
    paired = {}
    for cell, name, colour in (curves.baseline, curves.treatment):
        runs = {seed: evaluations[run_label(cell, seed)] for seed in _seeds(result)
                if run_label(cell, seed) in evaluations}
        for seed, run in runs.items():
            axes.plot(run["steps"], [100 * value for value in run["masked_lm_accuracy"]],
                      color=colour, linewidth=0.8, alpha=0.5,
                      label=f"{name}, each seed" if seed == min(runs) else None)
        if runs:
            steps = sorted(set.intersection(*(set(run["steps"]) for run in runs.values())))
            mean = [100 * np.mean([run["masked_lm_accuracy"][run["steps"].index(step)]
                                   for run in runs.values()]) for step in steps]
            axes.plot(steps, mean, color=colour, linewidth=2.5,
                      label=f"{name}, mean of {seeds_text(len(runs))}")
        paired[cell] = runs
    axes.set_xlabel("training step", fontsize=8)
    axes.set_ylabel("held-out MLM accuracy (%)", fontsize=8)
    axes.legend(fontsize=7)
    axes.grid(alpha=0.3)
    baseline, treatment = paired[curves.baseline[0]], paired[curves.treatment[0]]
    seeds = sorted(set(baseline) & set(treatment))
    per_seed = {}
    for seed in seeds:
        after, before = treatment[seed], baseline[seed]
        steps = [step for step in after["steps"] if step in before["steps"]]
        per_seed[seed] = dict(zip(steps, (
            100 * (after["masked_lm_accuracy"][after["steps"].index(step)]
                   - before["masked_lm_accuracy"][before["steps"].index(step)]) for step in steps)))
        differences.plot(steps, list(per_seed[seed].values()), color="grey", linewidth=0.8,
                         alpha=0.7, label="each seed" if seed == seeds[0] else None)
    if per_seed:
        steps = sorted(set.intersection(*(set(values) for values in per_seed.values())))
        differences.plot(steps, [np.mean([values[step] for values in per_seed.values()])
                                 for step in steps], color="black", linewidth=2.5,
                         label=f"mean over {seeds_text(len(per_seed))}")
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
    differences.set_ylabel(curves.difference_axis, fontsize=8)
    differences.legend(fontsize=7)
    differences.grid(alpha=0.3)
    figure.suptitle(title, fontsize=9)
    save_figure(plt, figure, path)
