"""What the judges of pre-registered criteria on differences of cells' held-out masked-LM
accuracies share (Table 4: sharing_criteria, Table 3: embedding_criteria, the dropout runs:
dropout_criteria).

A criterion there is a difference of cells' accuracies, signed so that the paper's claim is
positive; a cell's accuracy is the mean over its seeds. Every interval comes from one set of
document-bootstrap draws for all cells (`albert.evaluation.document_bootstrap`): the held-out
documents are drawn once per resample for every cell (paired), each several-seed cell's seeds
on their own. A seed's own difference uses the runs of one seed number.

The counts are the per-document masked tokens and correct predictions that each finished
run's `result.json` recorded from its final checkpoint, so judging needs no checkpoint and no
evaluation, and works on the committed result files alone. Runs arrive over hours: a criterion
whose runs are not all finished is "not yet judged" (`passes` null), with provisional numbers
from the runs present; it is never reported as passed or failed. A partial judgement's files
are replaced by the next one; a complete judgement, and files the command did not write, are
never overwritten.
"""

import dataclasses
import os
import sys
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from albert import io
from albert.errors import InputError
from albert.evaluation.document_bootstrap import (BOOTSTRAP_SEED, MaskedTokenCounts,
                                                  document_draws, interval, one_sided_lower)
from albert.paper.criteria import recorded_final_step, run_directory
from albert.paper.reproduce import MASKED_LM_DOCUMENTS, RESULT


@dataclasses.dataclass(frozen=True)
class Difference:
    """A signed sum of cells' pooled accuracies: ((cell label, +1 or -1), ...)."""

    name: str
    terms: Tuple[Tuple[str, int], ...]
    criterion: Optional[str] = None

    @property
    def cells(self) -> List[str]:
        return [cell for cell, _ in self.terms]


def run_label(cell: str, seed: int) -> str:
    return f"{cell}, seed {seed}"


class Runs:
    """Every pre-registered run's per-document masked-LM counts (finished runs only), aligned
    on one list of held-out documents; `missing` names the runs not finished yet.

    `design` is {cell label: (run name, its seeds)}, in the order the judgement lists the
    cells; seed 1 of a run lives in runs/<run name>, seed k in runs/<run name>-seed<k>.
    """

    def __init__(self, output_dir: str, final_step: int,
                 design: Dict[str, Tuple[str, Sequence[int]]], table: str):
        self.output_dir, self.final_step = output_dir, final_step
        self.run_names = {cell: run_name for cell, (run_name, _) in design.items()}
        self._design_seeds = {cell: list(seeds) for cell, (_, seeds) in design.items()}
        self.cells = list(design)
        found, self.missing, self.configs = {}, [], {}
        for name in self.cells:
            for seed in self._design_seeds[name]:
                path = os.path.join(self.directory(name, seed), RESULT)
                if io.exists(path):
                    found[name, seed], self.configs[name, seed] = self._counts(path, seed)
                else:
                    self.missing.append(run_label(name, seed))
        if not found:
            raise InputError(f"no finished {table} run in {self.output_dir}/runs (no "
                             f"{RESULT}): not the runs' --output_dir, or nothing finished yet")
        self.documents = np.unique(np.concatenate([counts.documents for counts in found.values()]))
        self.found = {key: self._aligned(counts) for key, counts in found.items()}

    def directory(self, cell: str, seed: int) -> str:
        return run_directory(self.output_dir, self.run_names[cell], seed)

    def design_seeds(self) -> Dict[str, List[int]]:
        """{cell label: its seeds}, as pre-registered."""
        return {cell: list(seeds) for cell, seeds in self._design_seeds.items()}

    def seed_run(self, cell: str, seed: int) -> Optional[int]:
        """The run of `cell` that stands for seed `seed` in a seed's own difference (None: the
        cell has no such seed, and seed `seed` compares only cells that have it)."""
        return seed if seed in self._design_seeds[cell] else None

    def present(self, cell: str) -> List[int]:
        return [seed for seed in self._design_seeds[cell] if (cell, seed) in self.found]

    def accuracy(self, cell: str, seed: int) -> float:
        return self.found[cell, seed].accuracy()

    def pooled(self, cell: str) -> float:
        """The cell's accuracy: the mean over its finished seeds."""
        return float(np.mean([self.accuracy(cell, seed) for seed in self.present(cell)]))

    def _counts(self, path: str, seed: int) -> Tuple[MaskedTokenCounts, dict]:
        result = io.read_json(path)
        step = recorded_final_step(result)
        if step != self.final_step:
            raise InputError(f"{path}: the run trained to step {step}, not --final_step="
                             f"{self.final_step}: not a run of these criteria")
        if result.get("random_seed", 1) != seed:
            raise InputError(f"{path}: the run's random seed is {result.get('random_seed')}, "
                             f"not {seed}, as its directory says")
        counts = result.get("intrinsic", {}).get(MASKED_LM_DOCUMENTS)
        if counts is None:
            raise InputError(f"{path} has no per-document masked-LM counts "
                             f"({MASKED_LM_DOCUMENTS}); `reproduce` adds them from the final "
                             "checkpoint")
        return (MaskedTokenCounts(**{field: np.asarray(values, np.int64 if field == "documents"
                                                       else np.float64)
                                     for field, values in counts.items()}),
                result.get("albert_config", {}))

    def _aligned(self, counts: MaskedTokenCounts) -> MaskedTokenCounts:
        """The counts on the union of every run's documents (a document absent from this run's
        held-out set weighs nothing in it)."""
        where = np.searchsorted(self.documents, counts.documents)
        aligned = {"documents": self.documents}
        for field in ("tokens", "correct"):
            aligned[field] = np.zeros(len(self.documents))
            aligned[field][where] = getattr(counts, field)
        return MaskedTokenCounts(**aligned)

    def held_out_sets_differ(self) -> Optional[dict]:
        """How many documents' masked tokens differ between runs, and the range of the runs'
        totals, when the runs were not all evaluated on one held-out set (None when they were)."""
        tokens = np.stack([counts.tokens for counts in self.found.values()])
        documents = int(np.count_nonzero((tokens != tokens[0]).any(axis=0)))
        if not documents:
            return None
        totals = tokens.sum(axis=1)
        return {"documents": documents, "masked_tokens_range": [int(totals.min()),
                                                                int(totals.max())]}


def check_resamples(resamples: int) -> None:
    if resamples < 1:
        raise InputError(f"--resamples must be at least 1, got {resamples}")


def cell_draws(runs: Runs, resamples: int) -> Dict[str, np.ndarray]:
    """Each cell's bootstrap draws of its pooled accuracy (cells with a finished run only): one
    document draw per resample for all cells, each cell's seeds drawn on their own."""
    present = [cell for cell in runs.cells if runs.present(cell)]
    return dict(zip(present, document_draws(
        [[runs.found[cell, seed] for seed in runs.present(cell)] for cell in present],
        resamples, BOOTSTRAP_SEED)))


def held_out_sets_warning(runs: Runs) -> Optional[dict]:
    """Runs.held_out_sets_differ, warned about on stderr."""
    differing = runs.held_out_sets_differ()
    if differing:
        print(f"WARNING: the runs were not all evaluated on one held-out set "
              f"({differing['documents']} documents have other masked tokens in some runs): "
              "each run is judged on its own counts", file=sys.stderr)
    return differing


def cell_entry(runs: Runs, cell: str, draws: np.ndarray) -> dict:
    """A cell's pooled accuracy, its interval, each seed's, the counts it rests on."""
    seeds = runs.present(cell)
    return {"accuracy": runs.pooled(cell),
            "ci95": list(interval(draws)),
            "seed_accuracies": {str(seed): runs.accuracy(cell, seed) for seed in seeds},
            "masked_tokens": [runs.found[cell, seed].total_tokens for seed in seeds],
            "documents": int(np.count_nonzero(runs.found[cell, seeds[0]].tokens)),
            "missing_seeds": [seed for seed in runs.design_seeds()[cell] if seed not in seeds]}


def difference_entry(difference: Difference, runs: Runs, draws: Dict[str, np.ndarray]) -> dict:
    """The difference pooled over the seeds present, its draws' interval and one-sided lower
    bound, each seed's own difference (where that seed's runs are all present), the runs it
    rests on and those missing; `value` None when a cell has no run yet."""
    design = runs.design_seeds()
    needed = [run_label(cell, seed) for cell in difference.cells for seed in design[cell]]
    entry = {"difference": difference.name, "criterion": difference.criterion, "runs": needed,
             "missing": [name for name in runs.missing if name in needed], "value": None}
    if any(not runs.present(cell) for cell in difference.cells):
        return entry
    seeds = range(1, max(len(design[cell]) for cell in difference.cells) + 1)
    seed_values = {}
    for seed in seeds:
        wanted = [(cell, runs.seed_run(cell, seed)) for cell in difference.cells]
        if all(key in runs.found for key in wanted):
            seed_values[str(seed)] = sum(sign * runs.accuracy(cell, run_seed) for
                                         (cell, run_seed), (_, sign) in zip(wanted,
                                                                            difference.terms))
    pooled = sum(sign * runs.pooled(cell) for cell, sign in difference.terms)
    resampled = sum(sign * draws[cell] for cell, sign in difference.terms)
    entry.update(value=pooled, ci95=list(interval(resampled)),
                 one_sided_lower95=one_sided_lower(resampled), seed_differences=seed_values,
                 provisional=bool(entry["missing"]))
    return entry


def numbers(entry: dict) -> dict:
    """A difference's numbers, as a criterion reports them."""
    return {name: entry[name] for name in ("value", "ci95", "one_sided_lower95",
                                           "seed_differences") if name in entry}


def lower_bound_above_zero(entry: dict) -> dict:
    """The one-sided verdict: passes when the one-sided lower bound is above 0."""
    return {"passes": entry["one_sided_lower95"] > 0}


def criterion_entry(text: str, entry: dict,
                    verdict: Callable[[dict], dict] = lower_bound_above_zero) -> dict:
    """A criterion that rests on one difference: judged by `verdict` (the fields it adds,
    `passes` among them) once all its runs are in; until then "not yet judged", with the
    numbers of the runs present as provisional."""
    judged = {"criterion": text, "difference": entry["difference"], "runs": entry["runs"]}
    if entry["missing"]:
        judged.update(status="not yet judged", passes=None, missing=entry["missing"])
        if entry["value"] is not None:
            judged["provisional"] = numbers(entry)
        return judged
    judged.update(status="judged", **numbers(entry))
    judged.update(verdict(entry))
    return judged


def agrees(entry: dict) -> bool:
    """Every seed's own difference has the sign of the pooled one (0 does not agree)."""
    sign = np.sign(entry["value"])
    return sign != 0 and all(np.sign(value) == sign
                             for value in entry["seed_differences"].values())


def seeds_agree(text: str, entries: List[dict], runs_missing: List[str],
                key: Callable[[dict], str]) -> dict:
    """Every seed's own difference has the sign of its pooled difference, for each of
    `entries` (reported per difference under `key(entry)`)."""
    judged = {"criterion": text,
              "runs": list(dict.fromkeys(name for entry in entries for name in entry["runs"]))}
    agree = {key(entry): agrees(entry) for entry in entries if entry["value"] is not None}
    missing = [name for name in runs_missing if any(name in entry["missing"]
                                                    for entry in entries)]
    if missing:
        judged.update(status="not yet judged", passes=None, missing=missing)
        if agree:
            judged["provisional"] = {"agree": agree}
        return judged
    judged.update(status="judged", agree=agree, passes=all(agree.values()))
    return judged


# ------------------------------------------------------------------------------ writing

NO_NUMBER = "no number until each of its cells has a run"


def outcome(entry: dict) -> str:
    """A criterion's verdict in words: 'passes', 'fails', 'passes: <outcome>', 'fails:
    <outcome>', or 'not yet judged: missing runs ...'."""
    if entry["passes"] is None:
        return "not yet judged: missing runs " + "; ".join(entry["missing"])
    if "outcome" in entry:
        return ("passes: " if entry["passes"] else "fails: ") + entry["outcome"]
    return "passes" if entry["passes"] else "fails"


def seeds_text(count: int) -> str:
    return f"{count} seed" + ("" if count == 1 else "s")


def points(value: float) -> str:
    return f"{100 * value:+.2f}"


def seed_points(values: Dict[str, float]) -> str:
    return ", ".join(f"seed {seed} {points(value)}" for seed, value in values.items())


def numbers_text(entry: dict) -> str:
    low, high = entry["ci95"]
    return (f"{points(entry['value'])} pt [{points(low)}, {points(high)}], one-sided "
            f"lower bound {points(entry['one_sided_lower95'])}; "
            f"{seed_points(entry['seed_differences'])}")


def provisional_text(entry: dict, text: str) -> str:
    """A criterion's numbers, marked as no verdict while it is not judged."""
    return f"provisional, not a verdict: {text}" if entry["passes"] is None else text


def criteria_lines(result: dict, what: str, seeds: str, signed: str,
                   numbers: Callable[[str, dict], str]) -> List[str]:
    """The opening of criteria.md: what was judged on how many seeds and resamples, whether
    runs are missing, and the criteria's table (`numbers(key, entry)`: a criterion's numbers
    in words)."""
    lines = [f"Pre-registered {what} at step {result['final_step']:,}: {seeds}, "
             f"{result['resamples']:,} document-bootstrap resamples (generator seed "
             f"{result['bootstrap_seed']}). Held-out masked-LM accuracy; differences in points, "
             f"{signed}.", ""]
    missing_runs = result["missing_runs"]
    if missing_runs:
        lines += [f"**Partial**: {len(missing_runs)} pre-registered runs have not finished: "
                  f"{'; '.join(missing_runs)}. A criterion that needs one is not yet judged; "
                  "its numbers are provisional.", ""]
    lines += ["| | criterion | outcome | numbers |", "|---|---|---|---|"]
    for key, entry in result["criteria"].items():
        lines.append(f"| ({key}) | {entry['criterion']} | {outcome(entry)} | "
                     f"{numbers(key, entry)} |")
    return lines


def cells_table(cells: Dict[str, dict]) -> List[str]:
    """Every cell's accuracy, interval, each seed's and the counts, as Markdown lines."""
    lines = ["Held-out MLM accuracy per cell (%, mean over seeds, 95 % document interval):",
             "", "| cell | accuracy | 95 % interval | each seed | masked tokens | documents |",
             "|---|---|---|---|---|---|"]
    for cell, entry in cells.items():
        low, high = entry["ci95"]
        each = ", ".join(f"{100 * value:.2f}" for value in entry["seed_accuracies"].values())
        missing = "".join(f"; seed {seed} not finished" for seed in entry["missing_seeds"])
        tokens = " / ".join(f"{total:,}" for total in sorted(set(entry["masked_tokens"])))
        lines.append(f"| {cell} | {100 * entry['accuracy']:.2f} | [{100 * low:.2f}, "
                     f"{100 * high:.2f}] | {each}{missing} | {tokens} | {entry['documents']:,} |")
    return lines


def differences_table(differences: List[dict]) -> List[str]:
    """Every difference with its interval and each seed's, as Markdown lines."""
    lines = ["Differences of MLM accuracy (points; the criteria's and, not judged, the "
             "others):", "", "| difference | criterion | points | 95 % interval | "
             "one-sided lower bound | each seed |", "|---|---|---|---|---|---|"]
    for entry in differences:
        low, high = entry["ci95"]
        criterion = f"({entry['criterion']})" if entry["criterion"] else "—"
        provisional = " (provisional)" if entry["provisional"] else ""
        lines.append(f"| {entry['difference']}{provisional} | {criterion} | "
                     f"{points(entry['value'])} | [{points(low)}, {points(high)}] | "
                     f"{points(entry['one_sided_lower95'])} | "
                     f"{seed_points(entry['seed_differences'])} |")
    return lines


def held_out_lines(result: dict) -> List[str]:
    differing = result.get("held_out_sets_differ")
    if not differing:
        return []
    low, high = differing["masked_tokens_range"]
    return ["", f"The runs were not all evaluated on one held-out set: "
            f"{differing['documents']} documents have other masked tokens in some runs "
            f"({low:,} to {high:,} masked tokens in all); each run is judged on its own."]


def pyplot():
    """matplotlib's pyplot on the file-only backend."""
    # Inside: matplotlib is an optional dependency (the "demo" extra).
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after choosing the file-only backend above

    return plt


def draw_differences(axes, entries: List[dict]) -> None:
    """Every difference: its pooled value with its 95 % interval, each seed's own difference as
    a cross, 0 as a line; the criteria's rows named by their letter, provisional ones grey."""
    for row, entry in enumerate(entries):
        value = 100 * entry["value"]
        low, high = (100 * bound for bound in entry["ci95"])
        colour = "grey" if entry["provisional"] else "black"
        axes.errorbar(value, row, xerr=[[value - low], [high - value]], fmt="o", color=colour,
                      capsize=3, label="seeds pooled, 95 % interval" if row == 0 else None)
        seeds = [100 * seed for seed in entry["seed_differences"].values()]
        axes.scatter(seeds, [row] * len(seeds), marker="x", color="tab:red", zorder=3,
                     label="each seed" if row == 0 else None)
    axes.axvline(0, color="grey", linestyle=":", linewidth=1)
    names = [(f"({entry['criterion']}) " if entry["criterion"] else "") + entry["difference"]
             + (" (provisional)" if entry["provisional"] else "") for entry in entries]
    axes.set_yticks(range(len(entries)), names, fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel("difference of held-out MLM accuracy (points),\n95 % document-bootstrap "
                    "interval", fontsize=8)


def plot_differences(result: dict, path: str, title: str) -> None:
    """One panel: every difference with its interval and each seed's (draw_differences)."""
    plt = pyplot()
    entries = result["differences"]
    figure, axes = plt.subplots(figsize=(10, 0.42 * len(entries) + 1.6))
    draw_differences(axes, entries)
    if result["missing_runs"]:
        title += f"\npartial: {len(result['missing_runs'])} runs missing"
    axes.set_title(title, fontsize=9)
    axes.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    save_figure(plt, figure, path)


def save_figure(plt, figure, path: str) -> None:
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def markdown_path(output: str) -> str:
    return os.path.splitext(output)[0] + ".md"


def check_outputs(output: str, plot_path: Optional[str]) -> None:
    """The JSON, its Markdown and the plot may replace files of a partial judgement (runs still
    missing): runs arrive over hours and are judged again. A complete judgement, and files this
    command did not write, are never overwritten."""
    if not output.endswith(".json"):
        raise InputError(f"--output={output}: a .json file (the Markdown is written beside it)")
    if os.path.exists(output):
        if io.read_json(output).get("complete", True):
            raise InputError(f"--output={output} holds a complete judgement; it is not "
                             "overwritten (choose another name or remove it)")
        return  # a partial judgement: its files are replaced
    for path in (markdown_path(output), plot_path):
        if path and os.path.exists(path):
            raise InputError(f"{path} exists and belongs to no partial judgement in --output; "
                             "it is not overwritten")


def write(result: dict, output: str, plot_path: Optional[str],
          format_markdown: Callable[[dict], str],
          plot: Callable[[dict, str], None]) -> List[str]:
    """criteria.json, its Markdown beside it and (with `plot_path`) the plot; returns the
    paths written."""
    io.write_json_atomically(output, result)
    io.write_text_atomically(markdown_path(output), format_markdown(result))
    written = [output, markdown_path(output)]
    if plot_path:
        temporary = plot_path + ".tmp.png"
        plot(result, temporary)
        os.replace(temporary, plot_path)
        written.append(plot_path)
    return written


def refuse_flags(args, table: str) -> None:
    """The `criteria` flags of other tables, refused for `table`."""
    for flag in ("early_step", "early_step_seeds", "figure_dir"):
        if getattr(args, flag, None) not in (None, ""):
            raise InputError(f"--{flag} is not {table}'s: its criteria are judged at "
                             "--final_step from the runs' result.json files")


def judge_and_write(args, runs: Callable[[], Runs], judge: Callable[[Runs, int], dict],
                    format_markdown: Callable[[dict], str],
                    plot: Callable[[dict, str], None]) -> int:
    """The `criteria` command of a judge: checks the outputs, reads the runs, judges, writes
    the JSON, its Markdown (also printed) and the plot."""
    check_resamples(args.resamples)
    check_outputs(args.output, args.plot)
    result = judge(runs(), args.resamples)
    written = write(result, args.output, args.plot, format_markdown, plot)
    sys.stdout.write(format_markdown(result))
    for path in written:
        print(f"Wrote {path}")
    return 0


def seeded_judge_command(args, table: str, seeds: int, final_step: int, runs_class,
                         judge: Callable[[Runs, int], dict],
                         format_markdown: Callable[[dict], str],
                         plot: Callable[[dict, str], None],
                         check_final_step: Optional[Callable[[int], None]] = None) -> int:
    """The `criteria` command of a judge over `runs_class(output_dir, seeds, final_step)`:
    --seeds and --final_step default to the pre-registration's `seeds` and `final_step`."""
    refuse_flags(args, table)
    seeds = seeds if args.seeds is None else args.seeds
    final_step = final_step if args.final_step is None else args.final_step
    if seeds < 1:
        raise InputError(f"--seeds must be at least 1, got {seeds}")
    if check_final_step:
        check_final_step(final_step)
    return judge_and_write(
        args, lambda: runs_class(os.path.abspath(args.output_dir), seeds, final_step), judge,
        format_markdown, plot)
