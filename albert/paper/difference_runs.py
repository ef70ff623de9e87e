"""Every pre-registered run of a design (albert.paper.preregistrations): the per-document
masked tokens and correct predictions that each finished run's `result.json` recorded from its
final checkpoint, aligned on one list of held-out documents, and the cells' bootstrap draws.

Judging needs no checkpoint and no evaluation, and works on the committed result files alone.
Every interval comes from one set of document-bootstrap draws for all cells
(`albert.evaluation.document_bootstrap`): the held-out documents are drawn once per resample
for every cell (paired), each several-seed cell's seeds on their own.
"""

import os
import sys
from typing import Dict, List, Optional, Tuple

import numpy as np

from albert import io
from albert.errors import InputError
from albert.evaluation.document_bootstrap import (BOOTSTRAP_SEED, MaskedTokenCounts,
                                                  document_draws, interval)
from albert.paper.criteria import recorded_final_step, run_directory
from albert.paper.preregistrations import Design
from albert.paper.reproduce import MASKED_LM_DOCUMENTS, RESULT


def run_label(cell: str, seed: int) -> str:
    return f"{cell}, seed {seed}"


class Runs:
    """Every pre-registered run's per-document masked-LM counts, albert_config and counted
    parameters (finished runs only), aligned on one list of held-out documents; `missing` names
    the runs not finished yet, `design_seeds` each cell's seeds (`seeds`: the design's --seeds).
    """

    def __init__(self, design: Design, output_dir: str, seeds: int, final_step: int):
        self.output_dir, self.final_step = output_dir, final_step
        groups = {group.name: group for group in design.seed_groups}
        self.seed_counts = {name: group.count(seeds) for name, group in groups.items()}
        self.run_names = {cell.label: cell.run_name for cell in design.cells}
        self.design_seeds = {cell.label: list(range(1, self.seed_counts[cell.seed_group] + 1))
                             for cell in design.cells}
        self._stands_for_every_seed = {cell.label for cell in design.cells
                                       if groups[cell.seed_group].one_run_for_every_seed}
        self.cells = [cell.label for cell in design.cells]
        # The runs' evaluations during training, where a design judges them
        # (albert.paper.training_curves.read_curves).
        self.curves: Dict[Tuple[str, int], Dict[int, float]] = {}
        self.steps: List[int] = []
        found, self.missing, self.configs, self.parameters = {}, [], {}, {}
        for name in self.cells:
            for seed in self.design_seeds[name]:
                path = os.path.join(self.directory(name, seed), RESULT)
                if io.exists(path):
                    result = io.read_json(path)
                    found[name, seed] = self._counts(path, result, seed)
                    self.configs[name, seed] = result.get("albert_config", {})
                    self.parameters[run_label(name, seed)] = result.get("parameters")
                else:
                    self.missing.append(run_label(name, seed))
        if not found:
            raise InputError(f"no finished {design.runs_name} run in {self.output_dir}/runs (no "
                             f"{RESULT}): not the runs' --output_dir, or nothing finished yet")
        self.documents = np.unique(np.concatenate([counts.documents for counts in found.values()]))
        self.found = {key: self._aligned(counts) for key, counts in found.items()}

    def directory(self, cell: str, seed: int) -> str:
        return run_directory(self.output_dir, self.run_names[cell], seed)

    def seed_run(self, cell: str, seed: int) -> Optional[int]:
        """The run of `cell` that stands for seed `seed` in a seed's own difference (None: the
        cell has no such seed, and seed `seed` compares only cells that have it)."""
        if cell in self._stands_for_every_seed:
            return self.design_seeds[cell][0]
        return seed if seed in self.design_seeds[cell] else None

    def present(self, cell: str) -> List[int]:
        return [seed for seed in self.design_seeds[cell] if (cell, seed) in self.found]

    def accuracy(self, cell: str, seed: int) -> float:
        return self.found[cell, seed].accuracy()

    def pooled(self, cell: str) -> float:
        """The cell's accuracy: the mean over its finished seeds."""
        return float(np.mean([self.accuracy(cell, seed) for seed in self.present(cell)]))

    def _counts(self, path: str, result: dict, seed: int) -> MaskedTokenCounts:
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
            "missing_seeds": [seed for seed in runs.design_seeds[cell] if seed not in seeds]}
