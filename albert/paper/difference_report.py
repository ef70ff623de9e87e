"""The words, plots and files of a judgement of differences (albert.paper.difference_criteria):
criteria.md's tables, the plots of differences (and of accuracy against a size), and the
outputs a partial judgement may replace.
"""

import os
from typing import Callable, Dict, List, Optional

from albert import io
from albert.errors import InputError
from albert.paper.preregistrations import SizeCurves

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


def plot_title(result: dict, title: str) -> str:
    """A plot's title, with a second line while runs are missing."""
    if result["missing_runs"]:
        title += f"\npartial: {len(result['missing_runs'])} runs missing"
    return title


def plot_differences(result: dict, path: str, title: str) -> None:
    """One panel: every difference with its interval and each seed's (draw_differences)."""
    plt = pyplot()
    entries = result["differences"]
    figure, axes = plt.subplots(figsize=(10, 0.42 * len(entries) + 1.6))
    draw_differences(axes, entries)
    axes.set_title(title, fontsize=9)
    axes.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    save_figure(plt, figure, path)


def plot_against_size(result: dict, path: str, title: str, curves: SizeCurves) -> None:
    """Left: each series' accuracy against the size (pooled over seeds, 95 % interval; each
    seed a dot). Right: every difference with its interval and each seed's."""
    plt = pyplot()
    entries = result["differences"]
    figure, (axes, differences) = plt.subplots(
        1, 2, figsize=(14, max(5.0, 0.42 * len(entries) + 1.6)),
        gridspec_kw={"width_ratios": [1, 1.3]})
    ticks: Dict[int, str] = {}
    for name, colour, shift, cells in curves.series:
        found = [(size, result["cells"][cell]) for size, cell in zip(curves.sizes, cells)
                 if cell in result["cells"]]
        if not found:
            continue
        sizes = [size for size, _ in found]
        means = [100 * cell["accuracy"] for _, cell in found]
        lows = [mean - 100 * cell["ci95"][0] for mean, (_, cell) in zip(means, found)]
        highs = [100 * cell["ci95"][1] - mean for mean, (_, cell) in zip(means, found)]
        axes.errorbar([size * shift for size in sizes], means, yerr=[lows, highs], fmt="o-",
                      color=colour, capsize=3, label=f"{name}, seeds pooled, 95 % interval")
        for size, cell in found:
            seeds = [100 * value for value in cell["seed_accuracies"].values()]
            axes.scatter([size * shift * 1.04] * len(seeds), seeds, s=12, color=colour,
                         alpha=0.6, zorder=3)
            trained = cell.get(f"trained_{curves.trained}")
            if trained and trained != size:
                ticks[size] = f"{size}\n(trained {trained})"
    axes.scatter([], [], s=12, color="grey", alpha=0.6, label="each seed")
    axes.set_xscale("log", base=2)
    axes.set_xticks(curves.sizes, [ticks.get(size, str(size)) for size in curves.sizes],
                    fontsize=8)
    axes.minorticks_off()
    axes.set_xlabel(curves.axis, fontsize=8)
    axes.set_ylabel("held-out MLM accuracy (%)", fontsize=8)
    axes.legend(fontsize=7)
    axes.grid(alpha=0.3)
    draw_differences(differences, entries)
    differences.legend(fontsize=7, loc="best")
    figure.suptitle(title, fontsize=9)
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


