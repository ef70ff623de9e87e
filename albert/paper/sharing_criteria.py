"""The pre-registered criteria of the multi-seed Table 4 (cross-layer sharing), from its runs.

`python -m albert.paper criteria --table=4 --output_dir=<the runs' reproduction> --seeds=3`
judges criteria (a)–(d) of docs/paper.md exactly as written there. Each criterion is a
difference of cells' held-out masked-LM accuracies, signed so that the paper's claim is
positive; a cell's accuracy is the mean over its seeds (the E=768 cells' `--seeds`, the E=128
cells' one). Its interval comes from one set of document-bootstrap draws for every cell
(`albert.evaluation.document_bootstrap`): the held-out documents are drawn once per resample
for all cells (paired), each several-seed cell's seeds on their own.

The counts are the per-document masked tokens and correct predictions that each finished
run's `result.json` recorded from its final checkpoint, so judging needs no checkpoint and no
evaluation, and works on the committed result files alone. Runs arrive over hours: a criterion
whose runs are not all finished is "not yet judged" (`passes` null), with provisional numbers
from the runs present; it is never reported as passed or failed.
"""

import dataclasses
import os
import sys
from typing import Dict, List, Optional, Tuple

import numpy as np

from albert import io
from albert.errors import InputError
from albert.evaluation.document_bootstrap import (BOOTSTRAP_SEED, RESAMPLES, MaskedTokenCounts,
                                                  document_draws, interval, one_sided_lower)
from albert.paper.criteria import recorded_final_step, run_directory
from albert.paper.reproduce import MASKED_LM_DOCUMENTS, RESULT
from albert.paper.tables import TABLES

LARGE_E, SMALL_E = "768", "128"   # the table's own E (at the cpu scale: 128 and 21)
ALL, ATTENTION, FFN, NONE = "all-shared", "shared-attention", "shared-FFN", "not-shared"
# The cells each E's runs train (pre-registered): E=128 shared-attention is not run.
DESIGN = {LARGE_E: (ALL, ATTENTION, FFN, NONE), SMALL_E: (ALL, FFN, NONE)}
SMALL_E_SEEDS = 1
FINAL_STEP = 6000
SEEDS = 3


def label(embedding: str, strategy: str) -> str:
    """A cell's label in Table 4, e.g. 'E=768, strategy=all-shared'."""
    return f"E={embedding}, strategy={strategy}"


def _embedding(cell_label: str) -> str:
    return cell_label.split(",")[0].split("=")[1]


@dataclasses.dataclass(frozen=True)
class Difference:
    """A signed sum of cells' pooled accuracies: ((cell label, +1 or -1), ...)."""

    name: str
    terms: Tuple[Tuple[str, int], ...]
    criterion: Optional[str] = None

    @property
    def cells(self) -> List[str]:
        return [cell for cell, _ in self.terms]


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


@dataclasses.dataclass
class Runs:
    """Every pre-registered run's per-document masked-LM counts (finished runs only), aligned
    on one list of held-out documents; `missing` names the runs not finished yet."""

    output_dir: str
    seeds: int = SEEDS
    final_step: int = FINAL_STEP

    def __post_init__(self):
        cells = {cell.label: cell for cell in TABLES[4].cells}
        self.cells = [name for name in cells if name in self.design_seeds()]
        found, self.missing = {}, []
        for name in self.cells:
            for seed in self.design_seeds()[name]:
                directory = run_directory(self.output_dir, cells[name].run_name, seed)
                path = os.path.join(directory, RESULT)
                if io.exists(path):
                    found[name, seed] = self._counts(path, seed)
                else:
                    self.missing.append(run_label(name, seed))
        if not found:
            raise InputError(f"no finished Table 4 run in {self.output_dir}/runs (no "
                             f"{RESULT}): not the runs' --output_dir, or nothing finished yet")
        self.documents = np.unique(np.concatenate([counts.documents for counts in found.values()]))
        self.found = {key: self._aligned(counts) for key, counts in found.items()}

    def design_seeds(self) -> Dict[str, List[int]]:
        """{cell label: its seeds}, as pre-registered."""
        return {label(embedding, strategy): list(range(1, (self.seeds if embedding == LARGE_E
                                                           else SMALL_E_SEEDS) + 1))
                for embedding, strategies in DESIGN.items() for strategy in strategies}

    def seed_run(self, cell: str, seed: int) -> int:
        """The run of `cell` that stands for seed `seed` of the table: the E=128 cells' one seed
        stands for every seed."""
        return seed if _embedding(cell) == LARGE_E else 1

    def present(self, cell: str) -> List[int]:
        return [seed for seed in self.design_seeds()[cell] if (cell, seed) in self.found]

    def _counts(self, path: str, seed: int) -> MaskedTokenCounts:
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
        return MaskedTokenCounts(**{field: np.asarray(values, np.int64 if field == "documents"
                                                      else np.float64)
                                    for field, values in counts.items()})

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


def run_label(cell: str, seed: int) -> str:
    return f"{cell}, seed {seed}"


def judge(runs: Runs, resamples: int = RESAMPLES) -> dict:
    """Criteria (a)–(d) as written before the runs, every number they rest on, every cell's
    accuracy and the descriptive differences; provisional where runs are missing."""
    present = [cell for cell in runs.cells if runs.present(cell)]
    draws = dict(zip(present, document_draws(
        [[runs.found[cell, seed] for seed in runs.present(cell)] for cell in present],
        resamples, BOOTSTRAP_SEED)))
    differences = [_difference(difference, runs, draws)
                   for difference in [CRITERIA["a"][1], CRITERIA["b"][1], CRITERIA["c"][1],
                                      *DESCRIPTIVE]]
    by_criterion = {entry["criterion"]: entry for entry in differences if entry["criterion"]}
    criteria = {key: _criterion(key, text, by_criterion[key])
                for key, (text, _) in CRITERIA.items()}
    criteria["d"] = _seeds_agree([by_criterion[key] for key in CRITERIA], runs.missing)
    differing = runs.held_out_sets_differ()
    if differing:
        print(f"WARNING: the runs were not all evaluated on one held-out set "
              f"({differing['documents']} documents have other masked tokens in some runs): "
              "each run is judged on its own counts", file=sys.stderr)
    result = {"table": 4, "final_step": runs.final_step,
              "seeds": {f"E={LARGE_E}": runs.seeds, f"E={SMALL_E}": SMALL_E_SEEDS},
              "resamples": resamples, "bootstrap_seed": BOOTSTRAP_SEED,
              "complete": not runs.missing, "missing_runs": runs.missing,
              "criteria": criteria,
              "cells": {cell: _cell(runs, cell, draws[cell]) for cell in present},
              "differences": [entry for entry in differences if entry.get("value") is not None]}
    if differing:
        result["held_out_sets_differ"] = differing
    return result


def _accuracy(runs: Runs, cell: str, seed: int) -> float:
    return runs.found[cell, seed].accuracy()


def _cell(runs: Runs, cell: str, cell_draws: np.ndarray) -> dict:
    seeds = runs.present(cell)
    return {"accuracy": float(np.mean([_accuracy(runs, cell, seed) for seed in seeds])),
            "ci95": list(interval(cell_draws)),
            "seed_accuracies": {str(seed): _accuracy(runs, cell, seed) for seed in seeds},
            "masked_tokens": [runs.found[cell, seed].total_tokens for seed in seeds],
            "documents": int(np.count_nonzero(runs.found[cell, seeds[0]].tokens)),
            "missing_seeds": [seed for seed in runs.design_seeds()[cell] if seed not in seeds]}


def _difference(difference: Difference, runs: Runs, draws: Dict[str, np.ndarray]) -> dict:
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
            seed_values[str(seed)] = sum(sign * _accuracy(runs, cell, run_seed) for
                                         (cell, run_seed), (_, sign) in zip(wanted,
                                                                            difference.terms))
    pooled = sum(sign * float(np.mean([_accuracy(runs, cell, seed) for seed in runs.present(cell)]))
                 for cell, sign in difference.terms)
    resampled = sum(sign * draws[cell] for cell, sign in difference.terms)
    entry.update(value=pooled, ci95=list(interval(resampled)),
                 one_sided_lower95=one_sided_lower(resampled), seed_differences=seed_values,
                 provisional=bool(entry["missing"]))
    return entry


def _numbers(entry: dict) -> dict:
    return {name: entry[name] for name in ("value", "ci95", "one_sided_lower95",
                                           "seed_differences") if name in entry}


def _criterion(key: str, text: str, entry: dict) -> dict:
    judged = {"criterion": text, "difference": entry["difference"], "runs": entry["runs"]}
    if entry["missing"]:
        judged.update(status="not yet judged", passes=None, missing=entry["missing"])
        if entry["value"] is not None:
            judged["provisional"] = _numbers(entry)
        return judged
    judged.update(status="judged", **_numbers(entry))
    if key == "c":
        low, high = entry["ci95"]
        judged["outcome"] = PAPERS_ORDER if low > 0 else REVERSE if high < 0 else NO_ORDER
        judged["passes"] = judged["outcome"] == PAPERS_ORDER
    else:
        judged["passes"] = entry["one_sided_lower95"] > 0
    return judged


def _agree(entry: dict) -> bool:
    sign = np.sign(entry["value"])
    return sign != 0 and all(np.sign(value) == sign
                             for value in entry["seed_differences"].values())


def _seeds_agree(entries: List[dict], runs_missing: List[str]) -> dict:
    """(d): every seed's own difference has the sign of the pooled one, for (a)–(c)'s."""
    judged = {"criterion": "every seed agrees in sign with its pooled difference",
              "runs": list(dict.fromkeys(name for entry in entries for name in entry["runs"]))}
    agree = {entry["criterion"]: _agree(entry) for entry in entries
             if entry["value"] is not None}
    missing = [name for name in runs_missing if any(name in entry["missing"]
                                                    for entry in entries)]
    if missing:
        judged.update(status="not yet judged", passes=None, missing=missing)
        if agree:
            judged["provisional"] = {"agree": agree}
        return judged
    judged.update(status="judged", agree=agree, passes=all(agree.values()))
    return judged


def outcome(entry: dict) -> str:
    """A criterion's verdict in words: 'passes', 'fails', 'fails: the reverse', or 'not yet
    judged: missing runs ...'."""
    if entry["passes"] is None:
        return "not yet judged: missing runs " + "; ".join(entry["missing"])
    if "outcome" in entry:
        return ("passes: " if entry["passes"] else "fails: ") + entry["outcome"]
    return "passes" if entry["passes"] else "fails"


def _seeds(count: int) -> str:
    return f"{count} seed" + ("" if count == 1 else "s")


def _points(value: float) -> str:
    return f"{100 * value:+.2f}"


def _seed_points(values: Dict[str, float]) -> str:
    return ", ".join(f"seed {seed} {_points(value)}" for seed, value in values.items())


def _numbers_text(numbers: dict) -> str:
    low, high = numbers["ci95"]
    return (f"{_points(numbers['value'])} pt [{_points(low)}, {_points(high)}], one-sided "
            f"lower bound {_points(numbers['one_sided_lower95'])}; "
            f"{_seed_points(numbers['seed_differences'])}")


def _criterion_numbers(key: str, entry: dict) -> str:
    if key == "d":
        agree = entry.get("agree", entry.get("provisional", {}).get("agree", {}))
        text = ", ".join(f"({name}) {'agree' if value else 'disagree'}"
                         for name, value in agree.items())
    elif "value" in entry:
        text = f"{entry['difference']}: {_numbers_text(entry)}"
    elif "provisional" in entry:
        text = f"{entry['difference']}: {_numbers_text(entry['provisional'])}"
    else:
        return "no number until each of its cells has a run"
    return f"provisional, not a verdict: {text}" if entry["passes"] is None else text


def format_markdown(result: dict) -> str:
    seeds = result["seeds"]
    lines = [f"Pre-registered criteria of the multi-seed Table 4 at step "
             f"{result['final_step']:,}: {_seeds(seeds[f'E={LARGE_E}'])} per E={LARGE_E} cell, "
             f"{seeds[f'E={SMALL_E}']} per E={SMALL_E} cell, {result['resamples']:,} "
             f"document-bootstrap resamples (generator seed {result['bootstrap_seed']}). "
             "Held-out masked-LM accuracy; differences in points, signed so that the paper's "
             "claim is positive.", ""]
    if result["missing_runs"]:
        lines += [f"**Partial**: {len(result['missing_runs'])} pre-registered runs have not "
                  f"finished: {'; '.join(result['missing_runs'])}. A criterion that needs one "
                  "is not yet judged; its numbers are provisional.", ""]
    lines += ["| | criterion | outcome | numbers |", "|---|---|---|---|"]
    for key, entry in result["criteria"].items():
        lines.append(f"| ({key}) | {entry['criterion']} | {outcome(entry)} | "
                     f"{_criterion_numbers(key, entry)} |")
    lines += ["", "Held-out MLM accuracy per cell (%, mean over seeds, 95 % document interval):",
              "", "| cell | accuracy | 95 % interval | each seed | masked tokens | documents |",
              "|---|---|---|---|---|---|"]
    for cell, entry in result["cells"].items():
        low, high = entry["ci95"]
        each = ", ".join(f"{100 * value:.2f}" for value in entry["seed_accuracies"].values())
        missing = "".join(f"; seed {seed} not finished" for seed in entry["missing_seeds"])
        tokens = " / ".join(f"{total:,}" for total in sorted(set(entry["masked_tokens"])))
        lines.append(f"| {cell} | {100 * entry['accuracy']:.2f} | [{100 * low:.2f}, "
                     f"{100 * high:.2f}] | {each}{missing} | {tokens} | {entry['documents']:,} |")
    lines += ["", "Differences of MLM accuracy (points; the criteria's and, not judged, the "
              "others):", "", "| difference | criterion | points | 95 % interval | "
              "one-sided lower bound | each seed |", "|---|---|---|---|---|---|"]
    for entry in result["differences"]:
        low, high = entry["ci95"]
        criterion = f"({entry['criterion']})" if entry["criterion"] else "—"
        provisional = " (provisional)" if entry["provisional"] else ""
        lines.append(f"| {entry['difference']}{provisional} | {criterion} | "
                     f"{_points(entry['value'])} | [{_points(low)}, {_points(high)}] | "
                     f"{_points(entry['one_sided_lower95'])} | "
                     f"{_seed_points(entry['seed_differences'])} |")
    differing = result.get("held_out_sets_differ")
    if differing:
        low, high = differing["masked_tokens_range"]
        lines += ["", f"The runs were not all evaluated on one held-out set: "
                  f"{differing['documents']} documents have other masked tokens in some runs "
                  f"({low:,} to {high:,} masked tokens in all); each run is judged on its own."]
    return "\n".join(lines) + "\n"


def plot(result: dict, path: str) -> None:
    """Every difference: its pooled value with its 95 % interval, each seed's own difference as
    a cross, 0 as a line; the criteria's rows named by their letter, provisional ones grey."""
    # Inside: matplotlib is an optional dependency (the "demo" extra).
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after choosing the file-only backend above

    entries = result["differences"]
    figure, axes = plt.subplots(figsize=(10, 0.42 * len(entries) + 1.6))
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
    seeds = result["seeds"]
    title = (f"Table 4, step {result['final_step']:,}, {_seeds(seeds[f'E={LARGE_E}'])} per "
             f"E={LARGE_E} cell, {seeds[f'E={SMALL_E}']} per E={SMALL_E} cell")
    if result["missing_runs"]:
        title += f"\npartial: {len(result['missing_runs'])} runs missing"
    axes.set_title(title, fontsize=9)
    axes.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
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


def write(result: dict, output: str, plot_path: Optional[str]) -> List[str]:
    io.write_json_atomically(output, result)
    io.write_text_atomically(markdown_path(output), format_markdown(result))
    written = [output, markdown_path(output)]
    if plot_path:
        temporary = plot_path + ".tmp.png"
        plot(result, temporary)
        os.replace(temporary, plot_path)
        written.append(plot_path)
    return written
