"""The pre-registered criteria of Figure 1 (layer-to-layer transitions), from `transitions` files.

`python -m albert.paper criteria --table=1 --figure_dir=DIR --output=DIR/criteria.json
[--plot=DIR/figure1.png]` reads every `python -m albert.paper transitions` JSON in DIR whose
label is `<strategy>, seed <k>` (or the Table 4 cell's own `E=768, strategy=<strategy>, seed
<k>`), strategy not-shared or all-shared, k = 1, 2 or 3, and judges as docs/paper.md fixed
before the runs:

(a) all-shared's transitions are smoother: in every seed, all-shared's roughness is below
    not-shared's for the L2 distance and for the angle (6 comparisons);
(b) all-shared's transitions do not vanish: in every seed, all-shared's angle is above
    1 degree at every layer.

Reported beside them, not judged: each model's mean over layers of both metrics. While a
seed's pair is missing the judgement is partial: both criteria are "not yet judged" (`passes`
null) with provisional numbers from the runs present, never passed or failed, and a later
judgement replaces its files; a complete one is never overwritten. Any other file in DIR is an
error, but for the criteria's own outputs, a `transitions` JSON's own plot and hidden files
(temporaries of atomic writes).
"""

import os
import re
import sys
from typing import Dict, List, Optional, Tuple

from albert import io
from albert.errors import InputError
from albert.paper.difference_report import check_outputs, markdown_path, outcome
from albert.paper.difference_runs import run_label
from albert.paper.preregistrations import table4_label
from albert.paper.transitions import (ALL_SHARED, METRICS, NOT_SHARED, curve_summary,
                                      plot_curves)

SEEDS = (1, 2, 3)
STRATEGIES = (NOT_SHARED, ALL_SHARED)
MIN_ANGLE_DEGREES = 1.0
CRITERIA = {
    "a": ("all-shared's transitions are smoother",
          "in every seed, all-shared's roughness is below not-shared's for both the L2 distance "
          "and the angle (6 comparisons)"),
    "b": ("all-shared's transitions do not vanish",
          f"in every seed, all-shared's angle is above {MIN_ANGLE_DEGREES:g} degree at every "
          "layer"),
}
# The 12-layer pre-registration (2026-11-29): roughness from layer 1 on, so that the step from
# the embeddings' layer 0 to layer 1 does not decide alone, and (c), its mean over seeds.
CRITERIA_FROM_LAYER_1 = {
    "a": ("all-shared's transitions are smoother from layer 1 on",
          "in every seed, all-shared's roughness from layer 1 is below not-shared's, for the L2 "
          "distance and for the angle (6 comparisons)"),
    "b": CRITERIA["b"],
    "c": ("smoother on average",
          "the mean over seeds of the roughness from layer 1 is lower for all-shared, for both "
          "measures"),
}
_LABEL = re.compile(r"(?:" + re.escape(table4_label(768, "")) + r")?(?P<strategy>"
                    + "|".join(map(re.escape, STRATEGIES)) + r"), seed (?P<seed>\d+)")
SHORT_NAMES = {"l2_distance": "L2 roughness", "angle_degrees": "angle roughness"}
COLOURS = {NOT_SHARED: "tab:blue", ALL_SHARED: "tab:red"}
SEED_STYLES = {1: ("-", "o"), 2: ("--", "s"), 3: (":", "^")}


def parse_label(text: str) -> Optional[Tuple[str, int]]:
    """(strategy, seed) of a Figure 1 run's label, or None."""
    match = _LABEL.fullmatch(text.strip())
    return (match["strategy"], int(match["seed"])) if match else None


def read_runs(figure_dir: str, own_outputs: List[str]) -> Dict[Tuple[str, int], dict]:
    """{(strategy, seed): the transitions JSON, with its "file"} of every run in `figure_dir`;
    any file there that is neither such a run nor one of `own_outputs`, a run's plot or a
    hidden file is an InputError."""
    if not figure_dir:
        raise InputError("criteria --table=1 needs --figure_dir (the directory of the runs' "
                         "`transitions` JSON files)")
    if not io.isdir(figure_dir):
        raise InputError(f"--figure_dir={figure_dir} is not a directory")
    own = {os.path.abspath(path) for path in own_outputs if path}
    names = sorted(name for name in io.listdir(figure_dir) if not name.startswith(".")
                   and os.path.abspath(os.path.join(figure_dir, name)) not in own)
    runs, plots, others = {}, set(), []
    for name in names:
        path = os.path.join(figure_dir, name)
        if not name.endswith(".json"):
            others.append(name)
            continue
        run = _read_run(path)
        key = parse_label(run["label"])
        if key is None:
            raise InputError(f"{path}: label {run['label']!r} is not a run of Figure 1's "
                             f"criteria ('<strategy>, seed <k>' with strategy "
                             f"{' or '.join(STRATEGIES)} and k in "
                             f"{', '.join(map(str, SEEDS))}); move it out of --figure_dir")
        strategy, seed = key
        if seed not in SEEDS:
            raise InputError(f"{path}: seed {seed} was not pre-registered (seeds "
                             f"{', '.join(map(str, SEEDS))})")
        if key in runs:
            raise InputError(f"{path} and {runs[key]['file']} are both "
                             f"{run_label(strategy, seed)!r}: one run per strategy and seed")
        if run["config"]["sharing"] != strategy:
            raise InputError(f"{path}: labelled {strategy} but its config is "
                             f"{run['config']['sharing']}")
        runs[key] = dict(run, file=name)
        if run.get("plot"):
            plots.add(run["plot"])
    strangers = [name for name in others if name not in plots]
    if strangers:
        raise InputError(f"--figure_dir={figure_dir} holds {', '.join(strangers)}: neither a "
                         "`transitions` JSON, its plot, nor this command's --output, its .md or "
                         "--plot; move them out")
    if not runs:
        raise InputError(f"--figure_dir={figure_dir} holds no `transitions` JSON yet")
    _check_comparable(runs)
    return runs


def _read_run(path: str) -> dict:
    try:
        run = io.read_json(path)
    except ValueError as error:
        raise InputError(f"{path} is not JSON: {error}") from None
    fields = ("label", "layers", "config", "input_sha256")
    if not isinstance(run, dict) or any(field not in run for field in fields):
        raise InputError(f"{path} is not a `python -m albert.paper transitions` output (it "
                         f"needs {', '.join(fields)}); move it out of --figure_dir")
    return run


def _check_comparable(runs: Dict[Tuple[str, int], dict]) -> None:
    """Every run measured on the same text, with the same number of layers."""
    for field, what in (("input_sha256", "text (--input_file's sha256)"),
                        ("max_seq_length", "--max_seq_length")):
        values = {run.get(field) for run in runs.values()}
        if len(values) > 1:
            listing = "; ".join(f"{run['file']}: {run.get(field)}" for run in runs.values())
            raise InputError(f"the runs were not measured on the same {what}: {listing}")
    depths = {len(run["layers"]) for run in runs.values()}
    if len(depths) > 1:
        raise InputError("the runs have different numbers of layers: " + "; ".join(
            f"{run['file']}: {len(run['layers'])}" for run in runs.values()))


def _values(run: dict, metric: str) -> List[float]:
    return [entry[metric] for entry in sorted(run["layers"], key=lambda entry: entry["layer"])]


def _roughness(run: dict, metric: str, from_layer: int) -> float:
    """The sum of |value(l) − value(l − 1)| over l > from_layer (from_layer 0: the whole curve,
    curve_summary's roughness)."""
    if from_layer == 0:
        return curve_summary(run["layers"])["roughness"][metric]
    values = _values(run, metric)[from_layer:]
    return float(sum(abs(after - before) for before, after in zip(values, values[1:])))


def _smoother(runs: Dict[Tuple[str, int], dict], seed: int, from_layer: int = 0) -> dict:
    """(a) in one seed: both roughnesses of both models, and whether all-shared's is lower."""
    numbers = {}
    for metric in METRICS:
        rough = {strategy: _roughness(runs[strategy, seed], metric, from_layer)
                 for strategy in STRATEGIES}
        numbers[metric] = dict(rough, all_shared_smoother=rough[ALL_SHARED] < rough[NOT_SHARED])
    return numbers


def _not_vanishing(run: dict) -> dict:
    """(b) in one seed: all-shared's smallest angle, at which layer, and whether it is above
    the threshold."""
    angles = _values(run, "angle_degrees")
    layer = min(range(len(angles)), key=angles.__getitem__)
    return {"min_angle_degrees": angles[layer], "at_layer": layer,
            "above_threshold": angles[layer] > MIN_ANGLE_DEGREES}


def _smoother_on_average(smoother: Dict[str, dict]) -> Dict[str, dict]:
    """(c): each model's roughness from layer 1, averaged over the seeds in `smoother`."""
    numbers = {}
    for metric in METRICS:
        mean = {strategy: float(sum(seed[metric][strategy] for seed in smoother.values())
                                / len(smoother)) for strategy in STRATEGIES}
        numbers[metric] = dict(mean, all_shared_smoother=mean[ALL_SHARED] < mean[NOT_SHARED])
    return {"mean": numbers} if smoother else {}


def _criterion(key: str, per_seed: Dict[str, dict], passed: List[bool], missing: List[str],
               criteria: Dict[str, tuple] = CRITERIA) -> dict:
    text, passes_when = criteria[key]
    entry = {"criterion": text, "passes_when": passes_when}
    if missing:
        entry.update(status="not yet judged", passes=None, missing=missing,
                     provisional={"seeds": per_seed})
    else:
        entry.update(status="judged", passes=all(passed), seeds=per_seed)
    return entry


def judge(runs: Dict[Tuple[str, int], dict], from_layer: int = 0) -> dict:
    """Criteria (a) and (b) as written before the runs (from_layer 1: the 12-layer
    pre-registration's (a), (b) and (c)), with every number they rest on; provisional where
    runs are missing."""
    texts = CRITERIA_FROM_LAYER_1 if from_layer else CRITERIA
    missing = [run_label(strategy, seed) for seed in SEEDS for strategy in STRATEGIES
               if (strategy, seed) not in runs]
    pairs = [seed for seed in SEEDS if all((strategy, seed) in runs for strategy in STRATEGIES)]
    smoother = {str(seed): _smoother(runs, seed, from_layer) for seed in pairs}
    vanishing = {str(seed): _not_vanishing(runs[ALL_SHARED, seed]) for seed in SEEDS
                 if (ALL_SHARED, seed) in runs}
    criteria = {
        "a": _criterion("a", smoother, [numbers[metric]["all_shared_smoother"]
                                        for numbers in smoother.values() for metric in METRICS],
                        missing, texts),
        "b": _criterion("b", vanishing, [numbers["above_threshold"]
                                         for numbers in vanishing.values()], missing, texts),
    }
    if from_layer:
        average = _smoother_on_average(smoother)
        criteria["c"] = _criterion("c", average, [numbers["all_shared_smoother"] for numbers
                                                  in average.get("mean", {}).values()],
                                   missing, texts)
    any_run = next(iter(runs.values()))
    extra = {"from_layer": from_layer} if from_layer else {}
    return {
        "figure": 1,
        **extra,
        "seeds": list(SEEDS),
        "complete": not missing,
        "missing_runs": missing,
        "input_file": any_run.get("input_file"),
        "input_sha256": any_run["input_sha256"],
        "max_seq_length": any_run.get("max_seq_length"),
        "criteria": criteria,
        # Not judged: each model's level (the paper notes ALBERT's is lower than BERT's).
        "runs": {run_label(strategy, seed): {
            "file": run["file"], "checkpoint": run.get("checkpoint"),
            "strategy": strategy, "seed": seed, "tokens": run.get("tokens"),
            **{metric: _values(run, metric) for metric in METRICS},
            **curve_summary(run["layers"])}
            for (strategy, seed), run in sorted(runs.items(), key=lambda item: (item[0][1],
                                                                                 item[0][0]))},
    }


def _criterion_numbers(key: str, entry: dict) -> str:
    seeds = entry["seeds"] if "seeds" in entry else entry["provisional"]["seeds"]
    if not seeds:
        return "no number until a seed's runs are in"
    parts = []
    for seed, numbers in seeds.items():
        if key in ("a", "c"):
            parts.append(f"{'seed ' if key == 'a' else ''}{seed}: " + ", ".join(
                f"{SHORT_NAMES[metric]} {numbers[metric][ALL_SHARED]:.3f} vs "
                f"{numbers[metric][NOT_SHARED]:.3f}"
                f"{'' if numbers[metric]['all_shared_smoother'] else ' (not smoother)'}"
                for metric in METRICS))
        else:
            parts.append(f"seed {seed}: {numbers['min_angle_degrees']:.3f}° at layer "
                         f"{numbers['at_layer']}")
    text = "; ".join(parts)
    return f"provisional, not a verdict: {text}" if entry["passes"] is None else text


def format_markdown(result: dict) -> str:
    lines = [f"Pre-registered criteria of Figure 1 (layer-to-layer transitions): seeds "
             f"{', '.join(map(str, result['seeds']))}, not-shared and all-shared each; every "
             f"number a mean over the real tokens of the same text (sha256 "
             f"{result['input_sha256'][:12]}…). (a) compares roughness, the sum over layers "
             f"l ≥ {result.get('from_layer', 0) + 1} of |value(l) − value(l − 1)| (all-shared "
             "vs not-shared); (b) all-shared's smallest angle"
             + ("; (c) (a)'s roughness averaged over seeds." if result.get("from_layer")
                else "."), ""]
    if result["missing_runs"]:
        lines += [f"**Partial**: {len(result['missing_runs'])} pre-registered runs are not in "
                  f"yet: {'; '.join(result['missing_runs'])}. The criteria are not yet judged; "
                  "their numbers are provisional.", ""]
    lines += ["| | criterion | passes when | outcome | numbers |", "|---|---|---|---|---|"]
    for key, entry in result["criteria"].items():
        lines.append(f"| ({key}) | {entry['criterion']} | {entry['passes_when']} | "
                     f"{outcome(entry)} | {_criterion_numbers(key, entry)} |")
    lines += ["", "Every run (not judged: the mean over layers, where the paper notes a drop "
              "for ALBERT relative to BERT):", "",
              "| run | L2 distance per layer | angle per layer (°) | roughness L2 | "
              "roughness angle | mean L2 | mean angle (°) |", "|---|---|---|---|---|---|---|"]
    for name, run in result["runs"].items():
        lines.append(
            f"| {name} | {', '.join(f'{value:.3f}' for value in run['l2_distance'])} | "
            f"{', '.join(f'{value:.2f}' for value in run['angle_degrees'])} | "
            f"{run['roughness']['l2_distance']:.3f} | {run['roughness']['angle_degrees']:.2f} | "
            f"{run['mean_over_layers']['l2_distance']:.3f} | "
            f"{run['mean_over_layers']['angle_degrees']:.2f} |")
    return "\n".join(lines) + "\n"


def plot(result: dict, path: str) -> None:
    """The paper's two panels, one line per run: not-shared and all-shared in two colours,
    seeds as line styles and markers."""
    curves = []
    for name, run in result["runs"].items():
        linestyle, marker = SEED_STYLES.get(run["seed"], ("-.", "x"))
        curves.append({"label": name, "style": {"color": COLOURS[run["strategy"]],
                                                "linestyle": linestyle, "marker": marker},
                       "layers": [{"layer": layer, **{metric: run[metric][layer]
                                                      for metric in METRICS}}
                                  for layer in range(len(run["l2_distance"]))]})
    title = "Figure 1: each layer's input against its output, mean over real tokens"
    if result["missing_runs"]:
        title += f"\npartial: {len(result['missing_runs'])} runs missing"
    plot_curves(curves, path, title)


def write(result: dict, output: str, plot_path: Optional[str]) -> List[str]:
    io.write_json_atomically(output, result)
    io.write_text_atomically(markdown_path(output), format_markdown(result))
    written = [output, markdown_path(output)]
    if plot_path:
        plot(result, plot_path)
        written.append(plot_path)
    return written


def judge_command(args) -> int:
    """`criteria --table=1`: judge, print the Markdown, write the JSON, the Markdown and the
    plot (replacing those of a partial judgement)."""
    check_outputs(args.output, args.plot)
    runs = read_runs(args.figure_dir, [args.output, markdown_path(args.output), args.plot])
    result = judge(runs, getattr(args, "from_layer", 0) or 0)
    written = write(result, args.output, args.plot)
    sys.stdout.write(format_markdown(result))
    for path in written:
        print(f"Wrote {path}")
    return 0
