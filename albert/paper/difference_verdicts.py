"""The differences of a judgement and the verdict rules of albert.paper.preregistrations, each
with the words criteria.md says its numbers in.

A difference's value is the signed sum of its cells' pooled accuracies (each the mean over the
cell's seeds), its interval from the cells' paired bootstrap draws; a seed's own difference
uses the runs of one seed number. A criterion whose runs are not all finished is "not yet
judged" (`passes` null), with provisional numbers from the runs present: it is never reported
as passed or failed.
"""

from typing import Callable, Dict, List, NamedTuple, Optional

import numpy as np

from albert.evaluation.document_bootstrap import interval, one_sided_lower
from albert.paper import preregistrations as rules
from albert.paper.difference_report import (NO_NUMBER, numbers_text, provisional_text,
                                            seed_points)
from albert.paper.difference_runs import Runs, run_label
from albert.paper.preregistrations import Criterion, Difference

# TWO_SIDED_ORDER's outcomes: the interval above 0, below 0, or containing it.
PAPERS_ORDER, REVERSE, NO_ORDER = "the paper's order", "the reverse", "no order"


def difference_entry(difference: Difference, criterion: Optional[str], runs: Runs,
                     draws: Dict[str, np.ndarray]) -> dict:
    """The difference pooled over the seeds present, its draws' interval and one-sided lower
    bound, each seed's own difference (where that seed's runs are all present), the runs it
    rests on and those missing; `value` None when a cell has no run yet."""
    design = runs.design_seeds
    needed = [run_label(cell, seed) for cell in difference.cells for seed in design[cell]]
    entry = {"difference": difference.name, "criterion": criterion, "runs": needed,
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


def verdict(judged: dict, missing: List[str], found: Optional[dict],
            passes: Callable[[], dict]) -> dict:
    """`judged` with `found` and the fields `passes()` adds (`passes` among them) once none of
    its runs is `missing`; until then "not yet judged", with `found` (if any) as provisional."""
    if missing:
        judged.update(status="not yet judged", passes=None, missing=missing)
        if found:
            judged["provisional"] = found
    else:
        judged.update(status="judged", **(found or {}), **passes())
    return judged


def _lower_bound_above_zero(entry: dict) -> dict:
    return {"passes": entry["one_sided_lower95"] > 0}


def _order(entry: dict) -> dict:
    """Two-sided: either order is a finding, and only the paper's passes."""
    low, high = entry["ci95"]
    found = PAPERS_ORDER if low > 0 else REVERSE if high < 0 else NO_ORDER
    return {"outcome": found, "passes": found == PAPERS_ORDER}


def criterion_entry(text: str, entry: dict,
                    rule: Callable[[dict], dict] = _lower_bound_above_zero) -> dict:
    """A criterion that rests on one difference, judged by `rule` (the fields it adds)."""
    return verdict({"criterion": text, "difference": entry["difference"], "runs": entry["runs"]},
                   entry["missing"], entry["value"] is not None and numbers(entry),
                   lambda: rule(entry))


def _runs_of(entries: List[dict]) -> List[str]:
    return list(dict.fromkeys(name for entry in entries for name in entry["runs"]))


def _missing_of(entries: List[dict]) -> List[str]:
    return list(dict.fromkeys(name for entry in entries for name in entry.get("missing", [])))


def shown_numbers(entry: dict) -> Optional[dict]:
    """A criterion's numbers: its own once judged, else its provisional ones (None: none)."""
    return entry if entry["passes"] is not None else entry.get("provisional")


def _one_difference_words(criterion: Criterion, entry: dict) -> str:
    if shown_numbers(entry) is None:
        return NO_NUMBER
    return provisional_text(entry, f"{entry['difference']}: {numbers_text(shown_numbers(entry))}")


def _each_above_zero(criterion: Criterion, entries: List[dict], runs: Runs) -> dict:
    """Passes when each difference's one-sided lower bound is above 0, each listed under
    "numbers" with its own verdict; with a `peak`, its outcome names the peak."""
    judged = {"criterion": criterion.text, "runs": _runs_of(entries),
              "differences": [entry["difference"] for entry in entries]}
    found = {"numbers": [{"difference": entry["difference"], **numbers(entry)}
                         for entry in entries if entry["value"] is not None]}
    peak = _peak(criterion, runs) if criterion.peak else None
    if peak is not None:
        found["peak"] = peak

    def passes() -> dict:
        for listed, entry in zip(found["numbers"], entries):
            listed.update(_lower_bound_above_zero(entry))
        return {"passes": all(listed["passes"] for listed in found["numbers"]),
                **({} if peak is None else {"outcome": f"peak at {peak}"})}

    return verdict(judged, _missing_of(entries),
                   (found["numbers"] or peak is not None) and found, passes)


def _peak(criterion: Criterion, runs: Runs) -> Optional[str]:
    """The name of the peak's cell of highest pooled accuracy (None until each has a run)."""
    names, cells = zip(*criterion.peak.cells)
    if any(not runs.present(cell) for cell in cells):
        return None
    return names[int(np.argmax([runs.pooled(cell) for cell in cells]))]


def _each_above_zero_words(criterion: Criterion, entry: dict) -> str:
    listed_numbers = shown_numbers(entry) or {}
    if not listed_numbers.get("numbers"):
        return NO_NUMBER
    texts = [f"{listed['difference']}: {numbers_text(listed)}"
             + (" (lower bound not above 0)" if listed.get("passes") is False else "")
             for listed in listed_numbers["numbers"]]
    if entry["passes"] is None and listed_numbers.get("peak"):
        texts.append(f"{criterion.peak.described} at {listed_numbers['peak']}")
    return provisional_text(entry, "; ".join(texts))


def _each_judged_apart(criterion: Criterion, entries: List[dict], runs: Runs) -> dict:
    """Passes when each difference, judged as a criterion of its own, passes."""
    judged = [criterion_entry(criterion.text, entry) for entry in entries]
    return verdict({"criterion": criterion.text, "differences": judged, "runs": _runs_of(entries)},
                   _missing_of(judged), None,
                   lambda: {"passes": all(entry["passes"] for entry in judged)})


def _each_judged_apart_words(criterion: Criterion, entry: dict) -> str:
    parts = [f"{part['difference']}: {numbers_text(part.get('provisional', part))}"
             for part in entry["differences"] if "value" in part or "provisional" in part]
    return provisional_text(entry, "; ".join(parts) or NO_NUMBER)


def _agrees(entry: dict) -> bool:
    """Every seed's own difference has the sign of the pooled one (0 does not agree)."""
    sign = np.sign(entry["value"])
    return sign != 0 and all(np.sign(value) == sign
                             for value in entry["seed_differences"].values())


def _seeds_agree(criterion: Criterion, entries: List[dict], runs: Runs) -> dict:
    """Every seed's own difference has the sign of its pooled difference, for each of
    `entries` (each keyed as the criterion's `agreement_key` says)."""
    agree = {criterion.agreement_key.format(criterion=entry["criterion"],
                                            difference=entry["difference"]): _agrees(entry)
             for entry in entries if entry["value"] is not None}
    missing = [name for name in runs.missing if any(name in entry["missing"]
                                                    for entry in entries)]
    return verdict({"criterion": criterion.text, "runs": _runs_of(entries)}, missing,
                   agree and {"agree": agree}, lambda: {"passes": all(agree.values())})


def _seeds_agree_words(criterion: Criterion, entry: dict) -> str:
    agree = (shown_numbers(entry) or {}).get("agree", {})
    if criterion.agreement_shown is not None:
        text = ", ".join(f"{criterion.agreement_shown.format(key=name)} "
                         f"{'agree' if value else 'disagree'}" for name, value in agree.items())
        return provisional_text(entry, text)
    if not agree:
        return NO_NUMBER
    disagree = [name for name, value in agree.items() if not value]
    return provisional_text(entry, f"{len(agree) - len(disagree)} of {len(agree)} differences "
                            "agree" + "".join(f"; disagrees: {name}" for name in disagree))


def _same_parameters(criterion: Criterion, entries: List[dict], runs: Runs) -> dict:
    counts = sorted(set(runs.parameters.values()))
    return verdict({"criterion": criterion.text, "parameters": runs.parameters}, runs.missing,
                   {"distinct_counts": counts}, lambda: {"passes": len(counts) == 1})


def _same_parameters_words(criterion: Criterion, entry: dict) -> str:
    return provisional_text(entry, "counted parameters: " + ", ".join(
        f"{count:,}" for count in shown_numbers(entry)["distinct_counts"]))


def _in_every_seed(criterion: Criterion, entries: List[dict], runs: Runs) -> dict:
    """The difference above 0 in each of the design's seeds."""
    (entry,) = entries
    values = entry.get("seed_differences", {})
    seeds = max(len(seeds) for seeds in runs.design_seeds.values())
    return verdict({"criterion": criterion.text, "difference": entry["difference"],
                    "runs": entry["runs"]}, entry["missing"],
                   values and {"seed_differences": values},
                   lambda: {"passes": sorted(values) == sorted(map(str, range(1, seeds + 1)))
                            and all(value > 0 for value in values.values())})


def _in_every_seed_words(criterion: Criterion, entry: dict) -> str:
    if shown_numbers(entry) is None:
        return NO_NUMBER
    return provisional_text(entry, seed_points(shown_numbers(entry)["seed_differences"]))


class Rule(NamedTuple):
    """A verdict rule: judge(criterion, its difference entries, runs) -> the criterion's entry,
    words(criterion, that entry) -> its numbers in criteria.md."""

    judge: Callable[[Criterion, List[dict], Runs], dict]
    words: Callable[[Criterion, dict], str]


RULES = {
    rules.LOWER_BOUND_ABOVE_ZERO: Rule(
        lambda criterion, entries, runs: criterion_entry(criterion.text, *entries),
        _one_difference_words),
    rules.TWO_SIDED_ORDER: Rule(
        lambda criterion, entries, runs: criterion_entry(criterion.text, *entries, _order),
        _one_difference_words),
    rules.EACH_LOWER_BOUND_ABOVE_ZERO: Rule(_each_above_zero, _each_above_zero_words),
    rules.EACH_JUDGED_APART: Rule(_each_judged_apart, _each_judged_apart_words),
    rules.SEEDS_AGREE: Rule(_seeds_agree, _seeds_agree_words),
    rules.SAME_PARAMETERS: Rule(_same_parameters, _same_parameters_words),
    rules.ABOVE_ZERO_IN_EVERY_SEED: Rule(_in_every_seed, _in_every_seed_words),
}
