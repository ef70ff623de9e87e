"""The judge of every pre-registration in albert.paper.preregistrations: criteria on signed
differences of cells' pooled held-out masked-LM accuracies, with a document bootstrap.

`python -m albert.paper criteria --table=N --output_dir=<the runs' reproduction>` judges table
N's criteria exactly as its design writes them, from the runs' result.json files
(albert.paper.difference_runs), by its verdict rules (albert.paper.difference_verdicts, and
albert.paper.training_curves for the evaluations during training), and writes criteria.json,
criteria.md beside it (also printed) and, with --plot, a PNG. Runs arrive over hours: a
partial judgement's files are replaced by the next one; a complete judgement, and files the
command did not write, are never overwritten.
"""

import os
import sys
from typing import Dict, Optional

from albert.errors import InputError
from albert.evaluation.document_bootstrap import BOOTSTRAP_SEED
from albert.paper import difference_report as report
from albert.paper import training_curves
from albert.paper.difference_runs import Runs, cell_draws, cell_entry, held_out_sets_warning
from albert.paper.difference_verdicts import RULES, Rule, difference_entry
from albert.paper.preregistrations import ABOVE_ZERO_THROUGH_TRAINING, Design


def _rules(design: Design) -> Dict[str, Rule]:
    if design.training_curves is None:
        return RULES
    return {**RULES, ABOVE_ZERO_THROUGH_TRAINING: training_curves.rule(design.training_curves)}


def read_runs(design: Design, output_dir: str, seeds: Optional[int] = None,
              final_step: Optional[int] = None) -> Runs:
    """Every finished run of the design in `output_dir` (and its evaluations during training,
    where the design judges them); `seeds` and `final_step` default to the design's."""
    runs = Runs(design, output_dir, design.seeds if seeds is None else seeds,
                design.final_step if final_step is None else final_step)
    if design.training_curves:
        training_curves.read_curves(design, runs)
    return runs


def judge(design: Design, runs: Runs, resamples: int) -> dict:
    """The criteria as written before the runs, every number they rest on, every cell's
    accuracy and the descriptive differences; provisional where runs are missing."""
    draws = cell_draws(runs, resamples)
    entries = {}   # Difference -> its entry, the criteria's first, in the order listed
    for criterion in design.criteria:
        for difference in criterion.differences:
            if difference not in entries:
                entries[difference] = difference_entry(difference, criterion.key, runs, draws)
    for difference in design.descriptive:
        if difference not in entries:
            entries[difference] = difference_entry(difference, None, runs, draws)
    by_key = {criterion.key: criterion for criterion in design.criteria}
    rules = _rules(design)
    criteria = {criterion.key: rules[criterion.rule].judge(
        criterion, [entries[difference] for difference in criterion.differences]
        + [entries[difference] for key in criterion.over for difference in by_key[key].differences],
        runs) for criterion in design.criteria}
    differing = held_out_sets_warning(runs)
    cells = {cell: cell_entry(runs, cell, cell_draws) for cell, cell_draws in draws.items()}
    if design.size_curves:
        for cell, entry in cells.items():
            # The size the runs trained with (the scale's, e.g. E ÷ 6 at `cpu`), for the plot.
            trained = {runs.configs[cell, seed].get(design.size_curves.trained)
                       for seed in runs.present(cell)}
            entry[f"trained_{design.size_curves.trained}"] = (trained.pop() if len(trained) == 1
                                                               else None)
    seeds = runs.seed_counts
    result = {"table": design.table, "final_step": runs.final_step,
              "seeds": seeds[None] if list(seeds) == [None] else seeds,
              "resamples": resamples, "bootstrap_seed": BOOTSTRAP_SEED,
              "complete": not runs.missing, "missing_runs": runs.missing, "criteria": criteria,
              "cells": cells,
              "differences": [entry for entry in entries.values() if entry["value"] is not None]}
    if design.training_curves:
        result.update(first_step=design.training_curves.first_step,
                      evaluations=training_curves.evaluations(runs))
    if differing:
        result["held_out_sets_differ"] = differing
    return result


def _template_fields(result: dict) -> dict:
    """What a design's seeds_phrase and plot_title may name."""
    seeds = result["seeds"]
    fields = {"seeds": seeds, "final_step": result["final_step"]}
    if isinstance(seeds, dict):
        fields.update(seeds_text={group: report.seeds_text(count)
                                  for group, count in seeds.items()},
                      seeds_at=", ".join(f"{count} at {group}" for group, count in seeds.items()))
    else:
        fields["seeds_text"] = report.seeds_text(seeds)
    return fields


def format_markdown(design: Design, result: dict) -> str:
    """criteria.md: the criteria, every cell, every difference (and the evaluations during
    training, where the design judges them)."""
    criteria = {criterion.key: criterion for criterion in design.criteria}
    rules = _rules(design)
    lines = report.criteria_lines(
        result, design.heading, design.seeds_phrase.format(**_template_fields(result)),
        design.signed, lambda key, entry: rules[criteria[key].rule].words(criteria[key], entry))
    lines += ["", *report.cells_table(result["cells"])]
    if result["differences"]:
        lines += ["", *report.differences_table(result["differences"])]
    if design.training_curves:
        lines += ["", *training_curves.table(result, design.training_curves)]
    lines += report.held_out_lines(result)
    return "\n".join(lines) + "\n"


def plot(design: Design, result: dict, path: str) -> None:
    """Every difference with its interval and each seed's, beside the accuracy against a size
    or the evaluations during training where the design has them."""
    fields = _template_fields(result)
    title = report.plot_title(result, design.plot_title.format(
        **{**fields, "seeds": design.seeds_phrase.format(**fields)}))
    if design.training_curves:
        training_curves.plot(result, path, title, design.training_curves)
    elif design.size_curves:
        report.plot_against_size(result, path, title, design.size_curves)
    else:
        report.plot_differences(result, path, title)


def judge_command(design: Design, args) -> int:
    """`python -m albert.paper criteria --table=N`: --seeds and --final_step default to the
    design's."""
    for flag in design.refused_flags:
        if getattr(args, flag, None) not in (None, ""):
            raise InputError(design.refusal.format(flag=flag, owner=design.owner))
    seeds = design.seeds if args.seeds is None else args.seeds
    final_step = design.final_step if args.final_step is None else args.final_step
    if seeds < 1:
        raise InputError(f"--seeds must be at least 1, got {seeds}")
    if design.training_curves:
        training_curves.check_final_step(design, final_step)
    if args.resamples < 1:
        raise InputError(f"--resamples must be at least 1, got {args.resamples}")
    report.check_outputs(args.output, args.plot)
    runs = read_runs(design, os.path.abspath(args.output_dir), seeds, final_step)
    result = judge(design, runs, args.resamples)
    written = report.write(result, args.output, args.plot,
                           lambda found: format_markdown(design, found),
                           lambda found, path: plot(design, found, path))
    sys.stdout.write(format_markdown(design, result))
    for path in written:
        print(f"Wrote {path}")
    return 0
