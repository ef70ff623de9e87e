"""The pre-registered criteria of the multi-seed Table 5, computed from its runs.

`python -m albert.paper criteria --output_dir=<a Table 5 reproduction> --seeds=2` judges
criteria (a)–(f) of docs/paper.md exactly as written there, from the cells'
checkpoints at `--final_step` and `--early_step`: per held-out document counts
of every (cell, seed, step, set), then document-bootstrap draws
(`albert.evaluation.document_bootstrap`), paired where a criterion compares
two evaluations. A criterion on one set resamples that set's own documents
(as `python -m albert.paper evaluate` does); the asymmetry (c), which compares
the two sets, resamples the union of their documents (a document without
pairs in one set weighs nothing there).

Per-document counts are cached beside each run as `documents-<step>.json`
(written once, never overwritten), so judging again costs no evaluation. A
finished run whose checkpoint is gone is judged at its final step from the
per-document counts its result.json recorded from that checkpoint.
"""

import dataclasses
import os
import re
import sys
from typing import Dict, List, Optional

import numpy as np

from albert import io
from albert.config import AlbertConfig
from albert.errors import InputError
from albert.evaluation.document_bootstrap import (BOOTSTRAP_SEED, RESAMPLES, DocumentCounts,
                                                  document_counts, document_draws, interval,
                                                  one_sided_lower)
from albert.paper.reproduce import RESULT, record_predictions
from albert.paper.tables import TABLES
from albert.pretraining_data.schema import read_record_documents

SETS = ("NSP", "SOP")             # held-out sets, data/heldout-<set>.tfrecord
OBJECTIVES = ("None", "NSP", "SOP")
LEARNED_MARGIN = 0.01             # criterion (e): "above +1 point"


def cell_run_names() -> Dict[str, str]:
    """{sentence objective: run name} of Table 5's cells."""
    return {cell.label.split("task=")[1]: cell.run_name for cell in TABLES[5].cells}


def run_directory(output_dir: str, run_name: str, seed: int) -> str:
    """Seed 1 is the single-seed directory (as `python -m albert.paper reproduce --seeds`)."""
    return os.path.join(output_dir, "runs", run_name if seed == 1 else f"{run_name}-seed{seed}")


@dataclasses.dataclass
class Evaluations:
    """Per-document counts of every (objective, seed, step, set), aligned on one document list."""

    output_dir: str
    seeds: int
    batch_size: int = 256

    def __post_init__(self):
        self.records = {kind: os.path.join(self.output_dir, "data",
                                           f"heldout-{kind.lower()}.tfrecord") for kind in SETS}
        self.documents = {}
        for kind, path in self.records.items():
            if not os.path.isfile(path):
                raise InputError(f"{path} does not exist: --output_dir is not a Table 5 "
                                 "reproduction")
            documents = read_record_documents(path)
            if documents is None:
                raise InputError(f"{path} has no documents file (made before records knew "
                                 "their documents): the criteria need per-document counts")
            self.documents[kind] = documents
        self.order = np.union1d(*self.documents.values())

    def counts(self, objective: str, step: int, kind: str, across_sets: bool = False,
               seeds: Optional[List[int]] = None) -> List[DocumentCounts]:
        """One DocumentCounts per seed (all, or those listed) of the `objective` cell at `step`
        on the `kind` set: on the set's own documents (what `python -m albert.paper evaluate`
        resamples), or with `across_sets` on the union of both sets' documents, to pair it with
        the other set."""
        found = [self._seed_counts(objective, seed, step)[kind]
                 for seed in (seeds or range(1, self.seeds + 1))]
        if across_sets:
            return found
        own = np.isin(self.order, self.documents[kind])
        return [DocumentCounts(*(getattr(counts, field)[own] for field in
                                 ("documents", "pairs", "correct", "label_one")))
                for counts in found]

    def _seed_counts(self, objective: str, seed: int, step: int) -> Dict[str, DocumentCounts]:
        run_dir = run_directory(self.output_dir, cell_run_names()[objective], seed)
        cache = os.path.join(run_dir, f"documents-{step}.json")
        if not os.path.exists(cache):
            checkpoint = os.path.join(run_dir, "pretraining", f"model.ckpt-{step}")
            if not os.path.exists(checkpoint + ".index"):
                recorded = self._recorded_final_counts(run_dir, step)
                if recorded is None:
                    raise InputError(f"{checkpoint} does not exist: the {objective} cell's "
                                     f"seed {seed} has not reached step {step}")
                return recorded
            config = AlbertConfig.from_json_file(
                os.path.join(run_dir, "pretraining", "albert_config.json"))
            found = {}
            for kind in SETS:
                found_here = record_predictions(checkpoint, config, self.records[kind],
                                                self.batch_size)
                counts = document_counts(self.documents[kind], found_here.labels,
                                         found_here.predicted, self.order)
                found[kind] = {field: getattr(counts, field).tolist()
                               for field in ("documents", "pairs", "correct", "label_one")}
            io.write_json_atomically(cache, found)
        stored = io.read_json(cache)
        counts = {kind: DocumentCounts(**{field: np.asarray(values)
                                          for field, values in stored[kind].items()})
                  for kind in SETS}
        for kind, found in counts.items():
            if not np.array_equal(found.documents, self.order):
                raise InputError(f"{cache} does not match the held-out records' documents "
                                 "(the records were remade?); move it away to recompute it")
        return counts

    def _recorded_final_counts(self, run_dir: str, step: int):
        """The per-document counts a finished run's result.json holds for its final checkpoint,
        when `step` is that checkpoint's step: they were computed the way this module computes
        them, so a finished run needs no checkpoint (checkpoints are what users delete first).
        None when the run has no such record."""
        path = os.path.join(run_dir, RESULT)
        if not io.exists(path):
            return None
        result = io.read_json(path)
        recorded = result.get("intrinsic", {}).get("documents")
        if not recorded or recorded_final_step(result) != step:
            return None
        counts = {}
        for kind in SETS:
            own = recorded[f"{kind} acc"]
            # result.json holds each set's own documents; criteria align both on their union.
            where = np.searchsorted(self.order, own["documents"])
            if not np.array_equal(self.order[np.minimum(where, len(self.order) - 1)],
                                  own["documents"]):
                raise InputError(f"{path} does not match the held-out records' documents "
                                 "(the records were remade?)")
            aligned = {"documents": self.order}
            for field in ("pairs", "correct", "label_one"):
                aligned[field] = np.zeros(len(self.order))
                aligned[field][where] = own[field]
            counts[kind] = DocumentCounts(**aligned)
        return counts


def recorded_final_step(result: dict) -> Optional[int]:
    """The step of a finished run's final checkpoint: its pretraining command's
    --num_train_steps (None when the result records no pretraining command)."""
    for command in result.get("commands", []):
        if "run_pretraining.py" in command:
            found = re.search(r"--num_train_steps=(\d+)", command)
            return int(found.group(1)) if found else None
    return None


def _documents(count: int) -> str:
    return f"{count} document" + ("" if count == 1 else "s")


def _contains_zero(bounds) -> bool:
    return bounds[0] <= 0 <= bounds[1]


def _margins(seeds: List[DocumentCounts]) -> List[float]:
    return [counts.margin() for counts in seeds]


def judge(evaluations: Evaluations, final_step: int, early_step: int,
          resamples: int = RESAMPLES, early_seeds: Optional[List[int]] = None) -> dict:
    """Criteria (a)–(f) as written before the runs; every number they rest on is reported.
    `early_seeds` limits (f) to the seeds listed (all by default), for a seed whose
    `early_step` checkpoint is gone; (f) then says which seeds it rests on."""
    early_seeds = early_seeds or list(range(1, evaluations.seeds + 1))
    def draws(*evaluated, same_seeds=False):
        return document_draws(list(evaluated), resamples, BOOTSTRAP_SEED, same_seeds)

    at = {(objective, kind): evaluations.counts(objective, final_step, kind)
          for objective in OBJECTIVES for kind in SETS}
    sop_on_nsp_early = evaluations.counts("SOP", early_step, "NSP", seeds=early_seeds)
    sop_on_nsp_late = evaluations.counts("SOP", final_step, "NSP", seeds=early_seeds)
    differing = _differing_held_out_sets(at)
    for kind, found in differing.items():
        print(f"WARNING: the {kind} held-out set's pairs per document are not the same in every "
              f"evaluation ({_documents(found['documents'])} differ): some runs were evaluated "
              "on records made again from changed text", file=sys.stderr)
    criteria = {}

    (nsp_on_sop,) = draws(at["NSP", "SOP"])
    criteria["a"] = {"criterion": "NSP does not teach sentence order",
                     "margin_ci95": list(interval(nsp_on_sop)),
                     "seed_margins": _margins(at["NSP", "SOP"]),
                     "passes": _contains_zero(interval(nsp_on_sop))}

    (sop_on_nsp,) = draws(at["SOP", "NSP"])
    seed_margins = _margins(at["SOP", "NSP"])
    criteria["b"] = {"criterion": "SOP teaches some of NSP's task",
                     "margin_one_sided_lower95": one_sided_lower(sop_on_nsp),
                     "seed_margins": seed_margins,
                     "passes": one_sided_lower(sop_on_nsp) > 0 and min(seed_margins) > 0}

    # Paired across the two sets: both on the union of their documents.
    transfer, reverse = draws(evaluations.counts("SOP", final_step, "NSP", across_sets=True),
                              evaluations.counts("NSP", final_step, "SOP", across_sets=True))
    difference = transfer - reverse
    criteria["c"] = {"criterion": "the asymmetry: (SOP model on the NSP set) - (NSP model on "
                                  "the SOP set), paired on documents",
                     "difference": float(np.mean(_margins(at["SOP", "NSP"]))
                                         - np.mean(_margins(at["NSP", "SOP"]))),
                     "difference_one_sided_lower95": one_sided_lower(difference),
                     "passes": one_sided_lower(difference) > 0}

    none_nsp, none_sop = (draws(at["None", kind])[0] for kind in SETS)
    criteria["d"] = {"criterion": "no sentence objective, no sentence skill",
                     "margin_ci95": {"NSP": list(interval(none_nsp)),
                                     "SOP": list(interval(none_sop))},
                     "passes": _contains_zero(interval(none_nsp))
                     and _contains_zero(interval(none_sop))}

    (nsp_on_nsp,) = draws(at["NSP", "NSP"])
    (sop_on_sop,) = draws(at["SOP", "SOP"])
    criteria["e"] = {"criterion": "each objective is learned (interval above +1 point)",
                     "margin_ci95": {"NSP model, NSP set": list(interval(nsp_on_nsp)),
                                     "SOP model, SOP set": list(interval(sop_on_sop))},
                     "passes": interval(nsp_on_nsp)[0] > LEARNED_MARGIN
                     and interval(sop_on_sop)[0] > LEARNED_MARGIN}

    late, early = draws(sop_on_nsp_late, sop_on_nsp_early, same_seeds=True)
    growth = late - early
    criteria["f"] = {"criterion": f"SOP's transfer to NSP grows from step {early_step} to "
                                  f"{final_step} (paired on documents and seeds)",
                     "growth": float(np.mean(_margins(sop_on_nsp_late))
                                     - np.mean(_margins(sop_on_nsp_early))),
                     "growth_one_sided_lower95": one_sided_lower(growth),
                     "passes": one_sided_lower(growth) > 0}
    if early_seeds != list(range(1, evaluations.seeds + 1)):
        criteria["f"]["seeds"] = early_seeds

    margins = {f"{objective} model, {kind} set": {
        "margin": float(np.mean(_margins(at[objective, kind]))),
        "seed_margins": _margins(at[objective, kind]),
        "margin_ci95": list(interval(draws(at[objective, kind])[0])),
        "documents": int(np.count_nonzero(at[objective, kind][0].pairs)),
        "pairs": at[objective, kind][0].total_pairs,
        "seed_pairs": [counts.total_pairs for counts in at[objective, kind]]}
        for objective in OBJECTIVES for kind in SETS}
    result = {"final_step": final_step, "early_step": early_step, "seeds": evaluations.seeds,
              "resamples": resamples, "bootstrap_seed": BOOTSTRAP_SEED, "criteria": criteria,
              "margins": margins}
    if differing:
        result["held_out_sets_differ"] = differing
    return result


def _differing_held_out_sets(at: dict) -> dict:
    """Per held-out set whose pairs per document are not the same in every (cell, seed)
    evaluation: how many documents differ and the range of total pairs. Each run is still
    judged on its own counts; this says the runs did not all see one set."""
    differing = {}
    for kind in SETS:
        evaluated = [counts for (objective, set_kind), seeds in at.items() if set_kind == kind
                     for counts in seeds]
        pairs = np.stack([counts.pairs for counts in evaluated])
        documents = int(np.count_nonzero((pairs != pairs[0]).any(axis=0)))
        if documents:
            totals = pairs.sum(axis=1)
            differing[kind] = {"documents": documents,
                               "pairs_range": [int(totals.min()), int(totals.max())]}
    return differing


def format_markdown(result: dict) -> str:
    lines = [f"Pre-registered criteria at step {result['final_step']}, {result['seeds']} seeds "
             f"per cell, {result['resamples']:,} document-bootstrap resamples", "",
             "| | criterion | passes | numbers |", "|---|---|---|---|"]
    for key, entry in result["criteria"].items():
        numbers = "; ".join(f"{name} {_format(value)}" for name, value in entry.items()
                            if name not in ("criterion", "passes"))
        lines.append(f"| ({key}) | {entry['criterion']} | {'yes' if entry['passes'] else 'no'} "
                     f"| {numbers} |")
    lines += ["", f"Margins at step {result['final_step']} (accuracy − majority share, points; "
              "seeds pooled):", "",
              "| model, held-out set | margin | 95 % interval | each seed | documents | pairs |",
              "|---|---|---|---|---|---|"]
    for name, entry in result["margins"].items():
        low, high = entry["margin_ci95"]
        seeds = ", ".join(f"{100 * margin:+.2f}" for margin in entry["seed_margins"])
        pairs = " / ".join(f"{total:,}" for total in sorted(set(entry["seed_pairs"])))
        lines.append(f"| {name} | {100 * entry['margin']:+.2f} | [{100 * low:+.2f}, "
                     f"{100 * high:+.2f}] | {seeds} | {entry['documents']:,} | {pairs} |")
    for kind, found in result.get("held_out_sets_differ", {}).items():
        low, high = found["pairs_range"]
        lines += ["", f"The {kind} held-out set is not the same in every evaluation: "
                  f"{_documents(found['documents'])} with other pairs in some runs ({low:,} to "
                  f"{high:,} pairs in all); each run is judged on the set it was evaluated on."]
    return "\n".join(lines) + "\n"


def plot(result: dict, path: str) -> None:
    """Each (model, held-out set): the pooled margin with its 95 % interval, every seed's margin
    as a dot, chance (0) and criterion (e)'s +1 point as lines."""
    # Inside: matplotlib is an optional dependency (the "demo" extra).
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after choosing the file-only backend above

    names = list(result["margins"])
    figure, axes = plt.subplots(figsize=(7, 0.45 * len(names) + 1.2))
    for row, name in enumerate(names):
        entry = result["margins"][name]
        low, high = (100 * bound for bound in entry["margin_ci95"])
        margin = 100 * entry["margin"]
        axes.errorbar(margin, row, xerr=[[margin - low], [high - margin]], fmt="o",
                      color="black", capsize=3, label="seeds pooled" if row == 0 else None)
        axes.scatter([100 * value for value in entry["seed_margins"]],
                     [row] * len(entry["seed_margins"]), marker="x", color="tab:red", zorder=3,
                     label="each seed" if row == 0 else None)
    axes.axvline(0, color="grey", linestyle=":", linewidth=1)
    axes.axvline(100 * LEARNED_MARGIN, color="grey", linestyle="--", linewidth=0.8)
    axes.set_yticks(range(len(names)), names, fontsize=8)
    axes.invert_yaxis()
    axes.set_xlabel("margin over the majority share (points), 95 % document-bootstrap interval")
    axes.set_title(f"Table 5, step {result['final_step']:,}, {result['seeds']} seeds per cell",
                   fontsize=9)
    axes.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _format(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{name}: {_format(inner)}" for name, inner in value.items())
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_format(inner) for inner in value) + "]"
    if isinstance(value, float):
        return f"{value * 100:+.2f} pt"
    return str(value)
