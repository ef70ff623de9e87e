"""table<N>.md / .json / .png: our cells beside the paper's printed numbers.

Each cell is two rows: the paper's, then ours. Our intrinsic columns are the
final checkpoint's held-out accuracies (%; with `--seeds`, the mean over
seeds, and each sentence set's margin over its majority share with a
document-level bootstrap interval in the notes), our downstream columns the
best dev score of run_classifier.py (%, the paper's dev early stopping; the
first seed's). A column
we have no data for says so ("no data"); nothing is filled in from
elsewhere.
"""

import os
from typing import Dict, List, Optional

import numpy as np

from albert import io
from albert.evaluation.chance import ABOVE_CHANCE_STANDARD_ERRORS, sentence_label_counts
from albert.evaluation.document_bootstrap import DocumentCounts, difference_summary
from albert.paper.reproduce import PAPER_GLUE_TASKS, Reproduction, cell_masked_token_counts
from albert.paper.tables import DOWNSTREAM_COLUMNS, INTRINSIC_COLUMNS, Cell, Table
from albert.training.run_directory import read_train_log

NO_DATA = "no data"
DEMO_NOTE = ("SST-2 and STS-B here are the demo's GLUE-format stand-ins (`python -m albert.datasets "
             "glue-demo`: Pang & Lee movie-review polarity sentences as SST-2, 30 dev sentences; "
             "Lee et al. document-similarity ratings as STS-B, Pearson r), not the GLUE tasks.")


def _percent(value: Optional[float]) -> str:
    return NO_DATA if value is None else f"{100 * value:.1f}"


def _millions(count: int) -> str:
    return f"{count / 1e6:.1f}M" if count >= 1e5 else f"{count / 1e3:.0f}k"


def our_values(result: dict) -> Dict[str, str]:
    """Our row: every paper column, then extra downstream tasks under their GLUE names."""
    intrinsic, downstream = result["intrinsic"], result["downstream"]
    values = {"params": _millions(result["parameters"])}
    for column in INTRINSIC_COLUMNS:
        values[column] = _percent(intrinsic.get(column))
    for column in DOWNSTREAM_COLUMNS:
        values[column] = NO_DATA
    for task, score in sorted(downstream.items()):
        values[PAPER_GLUE_TASKS.get(task, task.upper())] = _percent(score["value"])
    return values


def extra_columns(results: List[dict]) -> List[str]:
    names = {PAPER_GLUE_TASKS.get(task, task.upper()) for result in results
             for task in result["downstream"]}
    return sorted(names - set(DOWNSTREAM_COLUMNS))


def run_findings(run_dir: str, intrinsic: dict) -> List[str]:
    """What the diagnostics found about a cell: the pretraining run's findings (the unigram
    plateau) and a sentence head answering one label on a held-out set."""
    found = []
    journal = os.path.join(run_dir, "pretraining", "eval_results.json")
    if io.exists(journal):
        for finding in io.read_json(journal).get("findings", []):
            if finding.get("kind") == "unigram_plateau":
                found.append(f"masked LM stuck at the unigram loss ({finding['unigram_loss']:.2f} "
                             f"nats) for {finding['steps']} steps, reported at step "
                             f"{finding['step']}")
    for name in ("NSP", "SOP"):
        predicted_one = intrinsic.get(f"heldout_{name.lower()}", {}).get(
            "sentence_order_predicted_one")
        if predicted_one is not None and not 0.005 < predicted_one < 0.995:
            found.append(f"sentence head answers label {int(predicted_one >= 0.5)} for every pair "
                         f"of the held-out {name} set")
    return found


def build_report(table: Table, cells: List[Cell], results: List[dict],
                 reproduction: Reproduction, demo_glue: bool) -> dict:
    columns = ["params", *INTRINSIC_COLUMNS, *DOWNSTREAM_COLUMNS, *extra_columns(results)]
    counts = heldout_label_counts(reproduction)
    rows = []
    for cell, result in zip(cells, results):
        paper = dict(cell.paper, params=cell.paper_params or "")
        rows.append({"cell": cell.label, "keys": dict(cell.keys), "run_name": cell.run_name,
                     "run_dir": reproduction.run_dir(cell),
                     "paper": {column: paper.get(column, "–") for column in columns},
                     "ours": our_values(result), "intrinsic": result["intrinsic"],
                     "downstream": result["downstream"], "commands": result["commands"],
                     "above_chance": ({} if "pooled_margins" in result
                                      else chance_margins(result["intrinsic"], counts)),
                     "margins": result.get("pooled_margins", {}),
                     "seed_margins": _seed_margins(result),
                     "masked_lm": result.get("pooled_masked_lm"),
                     "findings": run_findings(reproduction.run_dir(cell), result["intrinsic"])})
    notes = [f"Ours: scale `{reproduction.scale.name}` ({describe_scale(reproduction)}); "
             "the paper: BookCorpus + Wikipedia, batch 4096, sequence length 512, 125,000 steps.",
             "MLM acc and SOP acc are measured on the held-out sentence-order set, NSP acc on the "
             "held-out next-sentence set, both made from the held-out text with "
             "create_pretraining_data.py; the paper's intrinsic columns come from SQuAD and RACE "
             "dev text.",
             _chance_note(counts, with_intervals=all(row["margins"] for row in rows)),
             "SQuAD and RACE columns need their data (not available offline); Avg needs all five "
             "tasks."]
    if demo_glue:
        notes.append(DEMO_NOTE)
    notes += [_margin_note(row) for row in rows if row["above_chance"]]
    notes += [_interval_note(row) for row in rows if row["margins"]]
    notes += [_masked_lm_note(row) for row in rows if row["masked_lm"]]
    notes += [f"{row['cell']}: {'; '.join(row['findings'])}." for row in rows if row["findings"]]
    return {"table": table.number, "title": table.title, "scale": reproduction.scale.name,
            "key_columns": list(table.key_columns), "columns": columns, "rows": rows,
            "notes": notes, "masked_lm_differences": masked_lm_differences(cells, results),
            "commands": {"data": _data_commands(reproduction)}}


def masked_lm_differences(cells: List[Cell], results: List[dict]) -> List[dict]:
    """MLM acc of every two cells that differ in one setting (Table 4: the strategies at one
    E, one strategy at both E), first − second, with its 95 % interval from paired draws of
    the held-out documents (each cell's seeds drawn on their own). Cells without
    per-document counts are left out."""
    counted = [(cell, cell_masked_token_counts(result)) for cell, result in zip(cells, results)]
    counted = [(cell, counts) for cell, counts in counted if counts is not None]
    differences = []
    for index, (first, first_counts) in enumerate(counted):
        for second, second_counts in counted[index + 1:]:
            first_keys, second_keys = dict(first.keys), dict(second.keys)
            differing = [name for name in first_keys if first_keys[name] != second_keys.get(name)]
            if set(first_keys) != set(second_keys) or len(differing) != 1:
                continue
            summary = difference_summary(first_counts, second_counts)
            differences.append({"cells": [first.label, second.label], "differs_in": differing[0],
                                "seeds": [len(first_counts), len(second_counts)], **summary})
    return differences


def heldout_label_counts(reproduction: Reproduction) -> dict:
    """{"NSP acc": counts of the next-sentence set, "SOP acc": of the sentence-order set}."""
    return {f"{kind} acc": sentence_label_counts(reproduction.records("heldout", kind))
            for kind in ("NSP", "SOP")}


def chance_margins(intrinsic: dict, counts: dict) -> Dict[str, float]:
    """Standard errors by which each sentence accuracy lies above its set's majority share."""
    return {column: round(counts[column].margin(intrinsic[column]), 1)
            for column in counts if intrinsic.get(column) is not None}


def _chance_note(counts: dict, with_intervals: bool) -> str:
    nsp, sop = counts["NSP acc"], counts["SOP acc"]
    chance = ("Chance on our held-out sets (always answering the commoner label): NSP "
              f"{_percent(nsp.majority_share)} of {nsp.total:,} pairs, SOP "
              f"{_percent(sop.majority_share)} of {sop.total:,} pairs")
    if with_intervals:
        # Pairs of one document are not independent: the rows' intervals resample documents.
        return (chance + ". Each row's note gives its margin (accuracy − its set's majority "
                "share) with a 95 % interval that resamples whole held-out documents.")
    return (chance + f"; one standard error is about {100 * 0.5 / nsp.total ** 0.5:.1f} and "
            f"{100 * 0.5 / sop.total ** 0.5:.1f} points. Each row's note gives its sentence "
            "accuracies in standard errors above chance; "
            f"{ABOVE_CHANCE_STANDARD_ERRORS:g} or more counts as above chance (pairs counted "
            "as independent: the records have no documents file for document intervals).")


def _margin_note(row: dict) -> str:
    parts = [f"{column} {margin:+.1f} SE" for column, margin in row["above_chance"].items()]
    return f"{row['cell']}: above chance by {', '.join(parts)}."


def _seed_margins(result: dict) -> Dict[str, List[float]]:
    """Each seed's margin (accuracy − majority share) per sentence set, where recorded."""
    margins: Dict[str, List[float]] = {}
    for seed_result in result.get("seeds", []):
        for column, counts in seed_result["intrinsic"].get("documents", {}).items():
            margins.setdefault(column, []).append(round(DocumentCounts(
                **{field: np.asarray(values) for field, values in counts.items()}).margin(), 4))
    return margins


def _interval_note(row: dict) -> str:
    parts = []
    for column, pooled in row["margins"].items():
        low, high = pooled["margin_ci95"]
        seeds = row["seed_margins"].get(column, [])
        parts.append(f"{column.split()[0]} margin {100 * pooled['margin']:+.1f} points, document "
                     f"bootstrap 95 % interval [{100 * low:+.1f}, {100 * high:+.1f}] "
                     f"({pooled['seeds']} seed{'s' if pooled['seeds'] > 1 else ''}"
                     + (f": {', '.join(f'{100 * m:+.1f}' for m in seeds)}" if len(seeds) > 1
                        else "")
                     + f"; {pooled['documents']:,} documents, "
                       f"{_per_seed(pooled, 'pairs', 'seed_pairs', 'pairs')})")
    return f"{row['cell']}: {'; '.join(parts)}."


def _masked_lm_note(row: dict) -> str:
    masked = row["masked_lm"]
    low, high = masked["accuracy_ci95"]
    return (f"{row['cell']}: MLM acc {100 * masked['accuracy']:.1f}, document bootstrap 95 % "
            f"interval [{100 * low:.1f}, {100 * high:.1f}] ({masked['seeds']} "
            f"seed{'s' if masked['seeds'] > 1 else ''}; {masked['documents']:,} documents, "
            f"{_per_seed(masked, 'masked_tokens', 'seed_masked_tokens', 'masked tokens')}).")


def _per_seed(summary: dict, total: str, per_seed: str, unit: str) -> str:
    """A summary's total pairs (or masked tokens); each seed's where the seeds' held-out sets
    differ (records made again from changed text between the runs)."""
    found = [int(value) for value in summary.get(per_seed, [summary[total]])]
    if len(set(found)) == 1:
        return f"{found[0]:,} {unit}"
    return (" / ".join(f"{value:,}" for value in found)
            + f" {unit} (the seeds' held-out sets differ)")


def _format_differences(differences: List[dict]) -> List[str]:
    if not differences:
        return []
    lines = ["", "## Masked-LM differences between cells", "",
             "MLM acc of the first cell minus the second's (points), with a 95 % interval from "
             "paired draws of the held-out documents:", "",
             "| first | second | difference | 95 % interval | seeds |", "|---|---|---|---|---|"]
    for entry in differences:
        low, high = entry["difference_ci95"]
        lines.append(f"| {entry['cells'][0]} | {entry['cells'][1]} | "
                     f"{100 * entry['difference']:+.1f} | [{100 * low:+.1f}, {100 * high:+.1f}] | "
                     f"{entry['seeds'][0]} / {entry['seeds'][1]} |")
    return lines


def describe_scale(reproduction: Reproduction) -> str:
    scale = reproduction.scale
    return (f"widths ÷ {scale.width_divisor}, depth ÷ {scale.depth_divisor}, vocabulary {scale.vocab_size:,}, sequence length "
            f"{scale.max_seq_length}, batch {scale.train_batch_size}, {scale.num_train_steps:,} "
            f"LAMB steps at {scale.learning_rate:g}; corpus {reproduction.corpus}, held-out text "
            f"{reproduction.heldout}")


def _data_commands(reproduction: Reproduction) -> List[str]:
    path = reproduction.path("data", "commands.sh")
    return io.read_text(path).splitlines() if io.exists(path) else []


def format_markdown(report: dict, image: Optional[str] = None) -> str:
    keys, columns = report["key_columns"], report["columns"]
    lines = [f"# Table {report['table']}: {report['title']} (scale `{report['scale']}`)", ""]
    header = [*keys, "", *columns]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in report["rows"]:
        key_values = [row["keys"][key] for key in keys]
        for source in ("paper", "ours"):
            values = [row[source].get(column, "") for column in columns]
            lines.append("| " + " | ".join([*key_values, source, *values]) + " |")
    lines += [""] + [f"- {note}" for note in report["notes"]]
    lines += _format_differences(report.get("masked_lm_differences", []))
    image = image or f"table{report['table']}.png"
    lines += ["", f"![Table {report['table']}]({image})", "", "## Commands", "",
              "Data:", "", "```sh", *report["commands"]["data"], "```"]
    for row in report["rows"]:
        lines += ["", f"{row['cell']} (`{row['run_dir']}`):", "", "```sh", *row["commands"], "```"]
    return "\n".join(lines) + "\n"


def _moving_average(values: List[float], window: int) -> List[float]:
    averaged, total = [], 0.0
    for index, value in enumerate(values):
        total += value
        if index >= window:
            total -= values[index - window]
        averaged.append(total / min(index + 1, window))
    return averaged


def plot(report: dict, path: str) -> None:
    """Bars: held-out accuracies per cell (paper markers where it printed them);
    curves: training MLM loss and held-out MLM accuracy of every cell. A curve panel with no
    data for any cell (a run directory whose training log is gone) is left out, not drawn empty."""
    # Inside: matplotlib is an optional dependency (the "demo" extra).
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after choosing the file-only backend above

    rows = report["rows"]
    loss_curves, accuracy_curves = [], []
    for row in rows:
        records = read_train_log(os.path.join(row["run_dir"], "pretraining"))
        if records:
            loss_curves.append((row["cell"], [record["step"] for record in records],
                                _moving_average([record["masked_lm_loss"] for record in records],
                                                25)))
        eval_path = os.path.join(row["run_dir"], "pretraining", "eval_results.json")
        if io.exists(eval_path):
            evaluations = io.read_json(eval_path)["evaluations"]
            if evaluations:
                accuracy_curves.append(
                    (row["cell"], [entry["step"] for entry in evaluations],
                     [100 * entry["masked_lm_accuracy"] for entry in evaluations]))
    panels = 1 + bool(loss_curves) + bool(accuracy_curves)
    figure, axes = plt.subplots(1, panels, figsize=(16 * panels / 3, 4.8), squeeze=False)
    axes = list(axes[0])
    bars = axes.pop(0)
    width = 0.8 / len(INTRINSIC_COLUMNS)
    for offset, column in enumerate(INTRINSIC_COLUMNS):
        positions = [index + (offset - 1) * width for index in range(len(rows))]
        values = [100 * (row["intrinsic"].get(column) or 0) for row in rows]
        bars.bar(positions, values, width, label=f"ours: {column}")
        paper = [row["paper"].get(column) for row in rows]
        if any(value not in (None, "–") for value in paper):
            bars.scatter(positions, [float(value) for value in paper], marker="_", s=300,
                         color="black", zorder=3, label="paper" if offset == 0 else None)
    bars.axhline(50, color="grey", linestyle=":", linewidth=1)
    bars.set_xticks(range(len(rows)), [row["cell"] for row in rows], rotation=30, ha="right",
                    fontsize=8)
    bars.set_ylabel("held-out accuracy (%)")
    bars.set_ylim(0, 100)
    bars.legend(fontsize=7)
    bars.set_title(f"Table {report['table']} at scale {report['scale']}")
    if loss_curves:
        losses = axes.pop(0)
        for cell, steps, values in loss_curves:
            losses.plot(steps, values, label=cell, linewidth=1)
        losses.set_xlabel("step")
        losses.set_ylabel("training MLM loss (moving average, 25 steps)")
        losses.legend(fontsize=7)
    if accuracy_curves:
        accuracies = axes.pop(0)
        for cell, steps, values in accuracy_curves:
            accuracies.plot(steps, values, marker="o", label=cell, linewidth=1)
        accuracies.set_xlabel("step")
        accuracies.set_ylabel("held-out MLM accuracy (%)")
        accuracies.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_report(report: dict, output_dir: str, name: Optional[str] = None) -> List[str]:
    """Writes <name>.json, .md and .png (name: table<N> unless given)."""
    stem = os.path.join(output_dir, name or f"table{report['table']}")
    io.write_json_atomically(stem + ".json", report)
    io.write_text_atomically(stem + ".md",
                             format_markdown(report, os.path.basename(stem) + ".png"))
    temporary = stem + ".tmp.png"
    plot(report, temporary)
    os.replace(temporary, stem + ".png")
    return [stem + ".md", stem + ".json", stem + ".png"]
