"""`python -m albert.paper params|reproduce|evaluate|criteria|by-source|transitions|speed` (see
albert/paper/__init__.py and docs/paper.md)."""

import argparse
import dataclasses
import importlib
import importlib.util
import json
import os
import sys

import numpy as np

from albert import io
from albert.cli import report_interrupt
from albert.config import AlbertConfig
from albert.datasets.demo_corpus import require_demo_packages
from albert.errors import AlbertError, InputError, RunPreempted
from albert.evaluation.chance import recall_by_label, sentence_label_counts
from albert.evaluation.document_bootstrap import (RESAMPLES, document_counts, margin_summary,
                                                  masked_lm_summary, masked_token_counts)
from albert.paper import difference_criteria
from albert.paper.by_source import format_markdown as format_by_source
from albert.paper.by_source import margins_by_source
from albert.paper.criteria import Evaluations, judge
from albert.paper.criteria import format_markdown as format_criteria
from albert.paper.criteria import plot as plot_criteria
from albert.paper.params import format_markdown, parameter_rows
from albert.paper.preregistrations import DESIGNS, WARM_STARTED_DESIGNS
from albert.paper.report import build_report, write_report
from albert.paper.reproduce import Reproduction, evaluate_checkpoint, record_predictions
from albert.paper.scales import SCALES
from albert.paper.tables import TABLES
from albert.pretraining_data.schema import expand_record_patterns, read_record_documents


def _params(args) -> int:
    rows = parameter_rows()
    if args.format == "json":
        json.dump([dataclasses.asdict(row) for row in rows], sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_markdown(rows))
    return 0


def _select_cells(table, only):
    if not only:
        return list(table.cells)
    wanted = [part.strip() for part in only.split(";") if part.strip()]
    cells = [cell for cell in table.cells if cell.label in wanted]
    unknown = sorted(set(wanted) - {cell.label for cell in cells})
    if unknown:
        raise AlbertError(f"--cells: no cell {', '.join(map(repr, unknown))} in Table "
                          f"{table.number}; its cells are "
                          f"{'; '.join(cell.label for cell in table.cells)}")
    return cells


# --precision: run_pretraining.py's --mixed_precision for every run, whatever the CPU.
PRECISIONS = {"float32": "none", "bfloat16": "mixed_bfloat16"}


def depth_ladder(cell, layers: int, previous_depths: str):
    """`cell` at `layers` (paper depth); with `previous_depths` ("3,6,12", ascending, each below
    `layers`), warm-started from the same cell at the deepest of them, which is warm-started
    from the next, down to the first, trained from scratch: the paper's Table 11 protocol."""
    depths = [int(value) for value in previous_depths.split(",") if value.strip()] \
        if previous_depths else []
    if any(depth < 1 for depth in depths) or depths != sorted(set(depths)) or \
            (depths and depths[-1] >= layers):
        raise InputError(f"--warm_start_from_previous_depth={previous_depths}: ascending paper "
                         f"depths, each below --layers={layers}")
    previous = None
    for depth in [*depths, layers]:
        previous = dataclasses.replace(cell, num_hidden_layers=depth, warm_start_from=previous)
    return previous


def scaled_widths(cells, hidden_sizes: str, width_divisor: int):
    """Table 12's cells at the hidden sizes given for the scale (one per cell, in order), in
    place of the paper's widths divided by the scale (which the scale's 4 heads do not
    divide). Each cell's paper-size width becomes `size × width_divisor`, so the scale gives
    exactly `size` (and a feed-forward of 4 × size); run names carry the paper-size width."""
    sizes = [int(value) for value in hidden_sizes.split(",") if value.strip()]
    if len(sizes) != len(cells) or any(size < 1 for size in sizes):
        raise InputError(f"--hidden_sizes={hidden_sizes}: one positive size per cell "
                         f"({len(cells)}: {'; '.join(cell.label for cell in cells)})")
    return [dataclasses.replace(cell, hidden_size=size * width_divisor)
            for cell, size in zip(cells, sizes)]


def _reproduce(args) -> int:
    table = TABLES[args.table]
    scale = SCALES[args.scale]
    overrides = {key: getattr(args, key) for key in
                 ("num_train_steps", "train_batch_size", "finetuning_steps") if getattr(args, key)}
    if "num_train_steps" in overrides:
        steps = overrides["num_train_steps"]
        overrides["num_warmup_steps"] = steps // 10
        overrides["save_checkpoints_steps"] = max(1, min(scale.save_checkpoints_steps, steps // 2))
    scale = dataclasses.replace(scale, **overrides)
    for flag in ("corpus", "heldout"):
        if not os.path.isfile(getattr(args, flag)):
            raise InputError(f"--{flag}={getattr(args, flag)} is not a file (text in the "
                             "pretraining format: one sentence per line, blank lines between "
                             "documents)")
    if args.spm_model_file and not os.path.isfile(args.spm_model_file):
        raise InputError(f"--spm_model_file={args.spm_model_file} does not exist")
    glue_dir = {"demo": "demo", "none": None, "": None}.get(args.glue_dir, args.glue_dir)
    if glue_dir not in (None, "demo") and not os.path.isdir(glue_dir):
        raise InputError(f"--glue_dir={glue_dir} is not a directory")
    if args.seeds < 1:
        raise InputError(f"--seeds must be at least 1, got {args.seeds}")
    cells = _select_cells(table, args.cells)
    if args.dropout is not None:
        if not 0.0 <= args.dropout < 1.0:
            raise InputError(f"--dropout must be in [0, 1), got {args.dropout}")
        # Table 8's comparison on any table's cells: the same runs with another dropout
        # (their run names say the dropout, so they never collide with the table's own).
        cells = [dataclasses.replace(cell, dropout=args.dropout) for cell in cells]
    if args.layers is not None:
        if args.layers < 1:
            raise InputError(f"--layers must be at least 1, got {args.layers}")
        # Table 11's comparison (depth) on any table's cells: the run names say the depth.
        cells = [depth_ladder(cell, args.layers, args.warm_start_from_previous_depth)
                 for cell in cells]
    elif args.warm_start_from_previous_depth:
        raise InputError("--warm_start_from_previous_depth needs --layers (the ladder's top)")
    if args.hidden_sizes:
        cells = scaled_widths(cells, args.hidden_sizes, scale.width_divisor)
    if args.precision:
        # One precision for every run of a pre-registration, whatever this CPU has.
        scale = dataclasses.replace(scale, mixed_precision=PRECISIONS[args.precision])
    stem = (f"table{table.number}" + ("" if args.dropout is None else f"-dropout{args.dropout:g}")
            + ("" if args.layers is None else f"-layers{args.layers}")
            + ("-warm" if args.warm_start_from_previous_depth else ""))
    execute = args.run or scale.runs_by_default
    reproduction = Reproduction(args.output_dir, scale, os.path.abspath(args.corpus),
                                os.path.abspath(args.heldout),
                                args.spm_model_file and os.path.abspath(args.spm_model_file),
                                glue_dir if glue_dir in (None, "demo") else os.path.abspath(glue_dir),
                                execute=execute, seeds=args.seeds)
    if glue_dir == "demo":
        require_demo_packages()
    results = reproduction.run_table(table, cells)
    commands_file = reproduction.path(f"{stem}-commands.sh")
    with open(commands_file, "w", encoding="utf-8") as handle:
        handle.write("#!/bin/sh\n# Every step of this table, in order (cd to the repository "
                     "first).\nset -e\n" + "\n".join(reproduction.commands) + "\n")
    if not execute:
        print(f"Scale {scale.name}: nothing was run. The commands are in {commands_file}; run "
              f"them on your accelerators, then the same command with --run to evaluate every "
              "cell and write the table (finished runs are not retrained).")
        return 0

    report = build_report(table, cells, results, reproduction, demo_glue=glue_dir == "demo")
    for path in write_report(report, reproduction.output_dir, stem):
        print(f"Wrote {path}")
    return 0


def _evaluate(args) -> int:
    """Pretraining metrics of checkpoints on held-out record files, as a table's cells get them."""
    io.refuse_existing(args.output, "--output")
    checkpoints = [part for part in args.checkpoints.split(",") if part]
    records = [path for part in args.records.split(",") if part
               for path in (expand_record_patterns(part, "--records")
                            if io.has_glob_magic(part) else [part])]
    for checkpoint in checkpoints:
        if not os.path.exists(checkpoint + ".index"):
            raise InputError(f"--checkpoints: {checkpoint} is not a checkpoint (no "
                             f"{checkpoint}.index)")
    for path in records:
        if not os.path.isfile(path):
            raise InputError(f"--records: {path} is not a file")
    config = AlbertConfig.from_json_file(args.albert_config_file)
    counts = {path: sentence_label_counts(path) for path in records}
    documents = {path: _record_documents(path, counts[path].total) for path in records}
    per_document = {path: [] for path in records}
    masked_per_document = {path: [] for path in records}
    results = []
    for checkpoint in checkpoints:
        for path in records:
            found = record_predictions(checkpoint, config, path, args.eval_batch_size)
            per_document[path].append(document_counts(documents[path], found.labels,
                                                      found.predicted))
            masked_per_document[path].append(masked_token_counts(
                documents[path], found.masked_tokens, found.masked_correct))
            metrics = evaluate_checkpoint(checkpoint, config, path, args.eval_batch_size)
            accuracy = metrics["sentence_order_accuracy"]
            metrics.update(
                majority_share=counts[path].majority_share,
                standard_errors_above_chance=counts[path].margin(accuracy),
                recall_by_label=recall_by_label(accuracy, metrics["sentence_order_label_one"],
                                                metrics["sentence_order_predicted_one"]))
            intervals = margin_summary(per_document[path][-1:], args.resamples)
            del intervals["accuracy"], intervals["majority_share"]  # in metrics already
            metrics.update(intervals)
            masked = masked_lm_summary(masked_per_document[path][-1:], args.resamples)
            metrics.update(masked_tokens=masked["masked_tokens"],
                           masked_lm_accuracy_ci95=masked["accuracy_ci95"])
            results.append({"checkpoint": checkpoint, "records": path, **metrics})
            print(f"{checkpoint} on {path}: margin {intervals['margin']:+.4f}, document "
                  f"bootstrap 95 % interval [{intervals['margin_ci95'][0]:+.4f}, "
                  f"{intervals['margin_ci95'][1]:+.4f}] ({intervals['documents']} documents, "
                  f"{intervals['pairs']} pairs)", flush=True)
            print(f"{checkpoint} on {path}: masked-LM accuracy "
                  f"{metrics['masked_lm_accuracy']:.4f} (document bootstrap 95 % interval "
                  f"[{masked['accuracy_ci95'][0]:.4f}, {masked['accuracy_ci95'][1]:.4f}], "
                  f"{masked['masked_tokens']} masked tokens), sentence accuracy {accuracy:.4f} "
                  f"({metrics['standard_errors_above_chance']:+.1f} SE above the majority share "
                  f"{counts[path].majority_share:.4f}), recall by label "
                  f"{metrics['recall_by_label']['0']:.3f} / {metrics['recall_by_label']['1']:.3f}",
                  flush=True)
    if args.seeds_of_one_cell and len(checkpoints) > 1:
        for path in records:
            pooled = margin_summary(per_document[path], args.resamples)
            pooled_masked = masked_lm_summary(masked_per_document[path], args.resamples)
            results.append({"checkpoints": checkpoints, "records": path, "pooled": pooled,
                            "pooled_masked_lm": pooled_masked})
            print(f"{len(checkpoints)} seeds pooled on {path}: margin {pooled['margin']:+.4f}, "
                  f"document bootstrap 95 % interval [{pooled['margin_ci95'][0]:+.4f}, "
                  f"{pooled['margin_ci95'][1]:+.4f}]", flush=True)
    io.write_json_atomically(args.output, results)
    print(f"Wrote {args.output}")
    return 0


def _record_documents(path: str, pairs: int):
    """The corpus document of each record of `path`, or one document per record (with a
    warning) for data made before create_pretraining_data wrote them."""
    documents = read_record_documents(path)
    if documents is None:
        print(f"WARNING: {path} has no documents file beside its summary (data made by an older "
              "create_pretraining_data.py): its intervals treat every pair as its own document, "
              "as the naive standard error does, and cannot be clustered", file=sys.stderr)
        return np.arange(pairs)
    if len(documents) != pairs:
        raise InputError(f"{path} has {pairs} records but its documents file lists "
                         f"{len(documents)}: the documents file does not belong to these records")
    return documents


# --seeds, --final_step and --early_step of Table 5's pre-registration (docs/paper.md); the
# other tables' are their designs' (albert.paper.preregistrations).
CRITERIA_DEFAULTS = {5: {"seeds": 2, "final_step": 12000, "early_step": 6000}}


# Subcommands whose code lives in a module of their own: each module defines
# add_arguments(parser) and main(args) -> int.
MODULE_COMMANDS = {
    "transitions": ("albert.paper.transitions",
                    "the L2 distance and angle between every layer's input and output hidden "
                    "states of a checkpoint on text (the paper's Figure 1)"),
    "speed": ("albert.paper.speed",
              "training throughput of BERT and ALBERT sizes on this machine, one process and "
              "several workers (the paper's Table 2 speed column)"),
    "readme": ("albert.paper.readme_table",
               "the README's results table, made from docs/paper.md's scorecard (--check: only "
               "say whether it is stale)"),
}
# Pre-registered criteria judged by a module of their own (docs/paper.md): Figure 1 is "table"
# 1 here (the paper's Table 1 has no experiment). Each module defines judge_command(args) -> int.
MODULE_CRITERIA = {1: "albert.paper.figure1_criteria"}


def _criteria(args) -> int:
    """The pre-registered criteria of the multi-seed Table 5 ((a)-(f)), Figure 1 or a table
    of albert.paper.preregistrations (Tables 3, 4, 8 and 11), judged on the runs as written."""
    if args.from_layer and args.table != 1:
        raise InputError("--from_layer is Figure 1's (--table=1)")
    if args.table in MODULE_CRITERIA or args.table in DESIGNS:
        if args.plot and importlib.util.find_spec("matplotlib") is None:
            raise InputError("--plot needs matplotlib: pip install -e '.[demo]'")
        if args.warm_started:
            if args.table not in WARM_STARTED_DESIGNS:
                raise InputError(f"--warm_started: only Table(s) "
                                 f"{', '.join(map(str, WARM_STARTED_DESIGNS))} have a "
                                 "warm-started pre-registration")
            return difference_criteria.judge_command(WARM_STARTED_DESIGNS[args.table], args)
        if args.table in DESIGNS:
            return difference_criteria.judge_command(DESIGNS[args.table], args)
        return importlib.import_module(MODULE_CRITERIA[args.table]).judge_command(args)
    for name, value in CRITERIA_DEFAULTS[args.table].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.seeds < 1:
        raise InputError(f"--seeds must be at least 1, got {args.seeds}")
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        raise InputError("--plot needs matplotlib: pip install -e '.[demo]'")
    io.refuse_existing(args.output, "--output")
    if not 0 < args.early_step < args.final_step:
        raise InputError(f"--early_step={args.early_step} must be above 0 and below "
                         f"--final_step={args.final_step}")
    io.refuse_existing(args.plot, "--plot")
    early_seeds = None
    if args.early_step_seeds:
        try:
            early_seeds = sorted({int(seed) for seed in args.early_step_seeds.split(",")})
        except ValueError:
            raise InputError(f"--early_step_seeds={args.early_step_seeds}: seed numbers "
                             "separated by commas, such as 2 or 1,2") from None
        if not set(early_seeds) <= set(range(1, args.seeds + 1)):
            raise InputError(f"--early_step_seeds={args.early_step_seeds}: only seeds 1 to "
                             f"{args.seeds} were run")
    evaluations = Evaluations(os.path.abspath(args.output_dir), args.seeds, args.eval_batch_size)
    result = judge(evaluations, args.final_step, args.early_step, args.resamples, early_seeds)
    io.write_json_atomically(args.output, result)
    sys.stdout.write(format_criteria(result))
    print(f"Wrote {args.output}")
    if args.plot:
        plot_criteria(result, args.plot)
        print(f"Wrote {args.plot}")
    return 0


def _by_source(args) -> int:
    """Each sentence set's margin per held-out source, post hoc (albert/paper/by_source.py)."""
    io.refuse_existing(args.output, "--output")
    paths = [path for path in args.results.split(",") if path]
    for path in [args.corpus_manifest, *paths]:
        if not os.path.isfile(path):
            raise InputError(f"{path} does not exist")
    breakdown = margins_by_source([io.read_json(path) for path in paths],
                                  io.read_json(args.corpus_manifest), args.resamples)
    io.write_json_atomically(args.output, {"results": paths, "post_hoc": True,
                                           "margins_by_source": breakdown})
    sys.stdout.write(format_by_source(breakdown))
    print(f"Wrote {args.output}")
    return 0


class HelpWithDefaults(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's "(default: …)" after every option's help, but for options whose help says
    its default in its own words already, and options with none to show (None, a switch's
    False): "(default: None)" would only add noise beside "(default: trained on --corpus)"."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text.lower() or action.default is None or action.default is False:
            return text
        return super()._get_help_string(action)


def _add_command(commands, name: str, help_text: str) -> argparse.ArgumentParser:
    """A subcommand whose --help shows what it does and every option's default."""
    return commands.add_parser(name, help=help_text, description=help_text,
                               formatter_class=HelpWithDefaults)


def build_parser() -> argparse.ArgumentParser:
    """Every subcommand and its options."""
    parser = argparse.ArgumentParser(prog="python -m albert.paper",
                                     description="Reproduce the paper's tables.",
                                     formatter_class=HelpWithDefaults)
    commands = parser.add_subparsers(dest="command", required=True)
    params = _add_command(commands, "params", "parameter counts of Tables 1, 3, 4, 11 and 12")
    params.add_argument("--format", choices=("markdown", "json"), default="markdown",
                        help="a Markdown table or JSON rows")
    reproduce = _add_command(
        commands, "reproduce", "pretrain every cell of an ablation table and report it beside "
                               "the paper")
    reproduce.add_argument("--table", type=int, choices=sorted(TABLES), required=True,
                           help="the ablation table: 3 embedding size, 4 sharing, 5 sentence "
                                "objective, 8 dropout, 11 depth, 12 width")
    reproduce.add_argument("--scale", choices=list(SCALES), default="tiny",
                           help="tiny: 2 CPU cores, minutes (a smoke test: the heads stay at chance); "
                                "cpu: 2 CPU cores, about 2 hours for Table 5, the measured recipe; "
                                "small: a GPU; base: paper model sizes, shorter budget; paper: the "
                                "paper's settings, commands only (docs/paper.md)")
    reproduce.add_argument("--corpus", required=True,
                           help="training text (one sentence per line, blank line between documents)")
    reproduce.add_argument("--heldout", required=True,
                           help="held-out text in the same format (intrinsic evaluation)")
    reproduce.add_argument("--output_dir", required=True)
    reproduce.add_argument("--glue_dir", default="demo",
                           help="GLUE-format tasks to fine-tune every cell on; 'demo' (default): "
                                "the demo's real-data stand-ins; 'none': no downstream columns")
    reproduce.add_argument("--spm_model_file", default=None,
                           help="an existing SentencePiece model (default: trained on --corpus)")
    reproduce.add_argument("--cells", default=None,
                           help="only these cells, ';'-separated labels such as 'SP task=SOP'")
    reproduce.add_argument("--run", action="store_true",
                           help="run the paper scale here too (default: write its commands only)")
    reproduce.add_argument("--num_train_steps", type=int, default=None,
                           help="override the scale's pretraining steps")
    reproduce.add_argument("--train_batch_size", type=int, default=None,
                           help="override the scale's pretraining batch size")
    reproduce.add_argument("--finetuning_steps", type=int, default=None,
                           help="override the scale's fine-tuning steps")
    reproduce.add_argument("--seeds", type=int, default=1,
                           help="train every cell this many times (seed 1 is the default seed, "
                                "seed k > 1 runs with --random_seed=k into runs/<cell>-seed<k>); "
                                "the table shows the mean and each sentence set's margin pooled "
                                "over seeds with its document-level interval")
    reproduce.add_argument("--dropout", type=float, default=None,
                           help="train the cells with this dropout instead of their own (the "
                                "paper's ablations: 0.1; Table 8 compares 0); the table is "
                                "written as table<N>-dropout<value>.*")
    reproduce.add_argument("--layers", type=int, default=None,
                           help="train the cells with this many layers at paper size instead of "
                                "their own (the scale divides it as any depth: the cpu scale's "
                                "ceil(layers / 3), so 3, 6, 12, 24, 36 give 1, 2, 4, 8, 12 "
                                "layers); the table is written as table<N>-layers<value>.*")
    reproduce.add_argument("--warm_start_from_previous_depth", default=None,
                           help="with --layers: the paper depths below it, ascending, e.g. "
                                "'3,6,12,24' for --layers=36; each depth starts from the final "
                                "checkpoint of the one before (the first from scratch), as the "
                                "paper trained Table 11; run names end in -from-L<depth>")
    reproduce.add_argument("--hidden_sizes", default=None,
                           help="the cells' hidden sizes at the scale, one per cell in order "
                                "(Table 12 at cpu scale: 128,256,512,768, the paper's 1024, "
                                "2048, 4096, 6144 in the same 1:2:4:6 ratios from the scale's H=128); the "
                                "feed-forward size is 4× each")
    reproduce.add_argument("--precision", choices=sorted(PRECISIONS), default=None,
                           help="compute every run in this precision (default: the scale's; "
                                "cpu: bfloat16 where the CPU has it natively, else float32)")
    evaluate = _add_command(
        commands, "evaluate", "masked-LM and sentence accuracy of checkpoints on held-out "
                              "records, the margin over each set's majority share with a "
                              "document-level bootstrap interval, and each label's recall")
    evaluate.add_argument("--albert_config_file", required=True)
    evaluate.add_argument("--checkpoints", required=True,
                          help="comma-separated checkpoint prefixes (model.ckpt-N)")
    evaluate.add_argument("--records", required=True,
                          help="comma-separated pretraining record files (e.g. a held-out NSP "
                               "set and a held-out SOP set)")
    evaluate.add_argument("--output", required=True, help="JSON file to write (must not exist)")
    evaluate.add_argument("--eval_batch_size", type=int, default=256,
                          help="sequences per evaluation batch")
    evaluate.add_argument("--seeds_of_one_cell", action="store_true",
                          help="the checkpoints are seeds of one cell: also report each set's "
                               "margin pooled over them (documents and seeds resampled)")
    evaluate.add_argument("--resamples", type=int, default=RESAMPLES,
                          help="document-bootstrap resamples per interval")
    criteria = _add_command(
        commands, "criteria", "the pre-registered criteria (a)-(f) of the multi-seed Table 5 or "
                              "(a)-(d) of the multi-seed Table 4 (docs/paper.md) from a "
                              "reproduction's runs")
    criteria.add_argument("--table", type=int,
                          choices=sorted({*CRITERIA_DEFAULTS, *MODULE_CRITERIA, *DESIGNS}),
                          default=5,
                          help="5, 4, 3 (embedding size), 8 (dropout), 11 (depth), 12 (width) or 1 "
                               "(Figure 1)")
    criteria.add_argument("--warm_started", action="store_true",
                          help="Table 11: judge the ladder trained as the paper trained it, each "
                               "depth from the one before (reproduce "
                               "--warm_start_from_previous_depth)")
    criteria.add_argument("--from_layer", type=int, default=0,
                          help="Figure 1 only: the roughness sums the changes after this layer "
                               "(the 12-layer pre-registration: 1, with its criterion (c))")
    criteria.add_argument("--output_dir", default=None,
                          help="the --output_dir of the table's `reproduce` runs (every table "
                               "but Figure 1)")
    criteria.add_argument("--figure_dir", default=None,
                          help="Figure 1: the directory of the runs' `transitions` JSON files")
    criteria.add_argument("--seeds", type=int, default=None,
                          help="seeds per cell (Table 5, default 2) or per E=768 cell (Table 4, "
                               "default 3; its E=128 cells have one)")
    criteria.add_argument("--final_step", type=int, default=None,
                          help="the runs' final step (Table 5: 12000, Table 4: 6000)")
    criteria.add_argument("--early_step", type=int, default=None,
                          help="Table 5's (f): the earlier checkpoint (default 6000)")
    criteria.add_argument("--early_step_seeds", default=None,
                          help="Table 5: judge (f) on these seeds only, e.g. '2' (default: every "
                               "seed); for a seed whose --early_step checkpoint is gone. The "
                               "output names them")
    criteria.add_argument("--output", required=True,
                          help="JSON file to write (must not exist; Table 4 also writes its .md "
                               "beside it, and replaces the files of a partial judgement, one "
                               "with runs missing)")
    criteria.add_argument("--eval_batch_size", type=int, default=256,
                          help="sequences per evaluation batch")
    criteria.add_argument("--resamples", type=int, default=RESAMPLES,
                          help="document-bootstrap resamples per interval")
    criteria.add_argument("--plot", default=None,
                          help="also a PNG of every margin (Table 5) or difference (Table 4) "
                               "with its interval and each seed's (must not exist; needs the "
                               "demo extra's matplotlib)")
    by_source = _add_command(
        commands, "by-source", "each held-out sentence set's margin split by the source of its "
                               "documents (post hoc: news and technical prose in the larger "
                               "corpus)")
    by_source.add_argument("--results", required=True,
                           help="comma-separated result.json files of one cell's seeds (pooled)")
    by_source.add_argument("--corpus_manifest", required=True,
                           help="the larger corpus's manifest.json (its heldout_sources)")
    by_source.add_argument("--output", required=True, help="JSON file to write (must not exist)")
    by_source.add_argument("--resamples", type=int, default=RESAMPLES,
                           help="document-bootstrap resamples per interval")
    for name, (module_name, help_text) in MODULE_COMMANDS.items():
        importlib.import_module(module_name).add_arguments(_add_command(commands, name, help_text))
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "criteria" and args.table != 1 and not args.output_dir:
        parser.error("criteria: --output_dir is required")
    module_mains = {name: importlib.import_module(module_name).main
                    for name, (module_name, _) in MODULE_COMMANDS.items()}
    try:
        return {"params": _params, "reproduce": _reproduce, "evaluate": _evaluate,
                "criteria": _criteria, "by-source": _by_source,
                **module_mains}[args.command](args)
    except AlbertError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 1
    except RunPreempted as preempted:
        print(f"Preempted: {preempted}", file=sys.stderr)
        return 143
    except KeyboardInterrupt as interrupt:
        report_interrupt(interrupt)


if __name__ == "__main__":
    sys.exit(main())
