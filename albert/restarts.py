"""`--restarts=N`: N fine-tuning runs with consecutive seeds; the best on dev predicts.

The practice of the BERT and ALBERT papers on small tasks, shared by
run_classifier.py, run_squad.py and run_race.py:

* seed `--random_seed + i` trains in `<output_dir>/seed-<seed>/` through the
  script's own single-run code (same flags otherwise), so each seed is
  resumed, reused when finished, or refused when it holds other settings,
  exactly as a single run into that directory would be; feature caches go
  to `<output_dir>` and are shared by the seeds;
* then `<output_dir>/restarts.json` and a table in the log: per seed the
  best dev metric, its step, and whether that evaluation was degenerate
  (`albert.training.degenerate`); the mean, the standard deviation (n − 1)
  and the best seed;
* with `--do_predict` (or `--export_dir`), a single run into `<output_dir>`
  that does not train and predicts from the best seed's `model.ckpt-best`,
  writing the files a single run writes there.

`--restarts=1` (the default) is a single run, unchanged.
"""

import contextlib
import dataclasses
import math
from typing import Callable, Dict, List, Optional, Tuple

import keras
from absl import flags, logging

from albert import io
from albert.errors import InputError

FLAGS = flags.FLAGS
SUMMARY_FILE = "restarts.json"


def define_flags() -> None:
    flags.DEFINE_integer(
        "restarts", 1,
        "Train this many runs, seeds --random_seed, --random_seed+1, ..., each in "
        "<output_dir>/seed-<seed>/ (resumable); summarise them in restarts.json and predict "
        "with the best on dev (docs/finetuning.md). 1: a single run.")


@dataclasses.dataclass
class RestartPlan:
    """What differs between the scripts.

    Args:
      evaluates: the command trains and evaluates on dev (needed to pick a seed).
      predicts: the command asks for predictions (or an export) at the end.
      seed_flags: flag values of every seed's run besides the output directory and
        seed (e.g. no predictions; caches shared in `<output_dir>`).
      predict_flags: flag values of the final run from the best seed (no training).
      carried_flags: given the best seed's directory, flag values that stand in for what
        the initial checkpoint carried (its config, its tokenizer): the final run
        starts from the best seed's model.ckpt-best, which carries neither.
    """

    evaluates: bool
    predicts: bool
    seed_flags: Dict[str, object]
    predict_flags: Dict[str, object]
    carried_flags: Callable[[str], Dict[str, object]] = lambda best_directory: {}


@contextlib.contextmanager
def flag_values(values: Dict[str, object]):
    """Sets flags for the duration of a run, then puts the user's values back."""
    saved = {name: FLAGS[name].value for name in values}
    try:
        for name, value in values.items():
            FLAGS[name].value = value
        yield
    finally:
        for name, value in saved.items():
            FLAGS[name].value = value


def seed_directory(output_dir: str, seed: int) -> str:
    return io.join(output_dir, f"seed-{seed}")


def holds_single_run(output_dir: str) -> bool:
    """A directory with checkpoints or evaluations of its own (a run without --restarts)."""
    if io.exists(io.join(output_dir, "checkpoint")):
        return True
    journal = io.join(output_dir, "eval_results.json")
    return io.exists(journal) and bool(io.read_json(journal).get("evaluations"))


def main(run_once: Callable[[], None], plan: RestartPlan) -> None:
    """`run_once()` with --restarts=1; otherwise the seeds, the summary and the prediction."""
    restarts, output_dir = FLAGS.restarts, FLAGS.output_dir
    if restarts < 1:
        raise InputError(f"--restarts must be at least 1, got {restarts}")
    if restarts == 1:
        if io.exists(io.join(output_dir, SUMMARY_FILE)):
            raise InputError(f"{output_dir} holds runs of --restarts ({SUMMARY_FILE}); pass "
                             "--restarts again, or use a new --output_dir")
        run_once()
        return
    if not plan.evaluates:
        raise InputError("--restarts picks the best seed on dev: it needs training with dev "
                         "evaluation (run_classifier.py / run_race.py: --do_train --do_eval; "
                         "run_squad.py: --do_train --do_predict with answers in --predict_file)")
    if holds_single_run(output_dir):
        raise InputError(f"{output_dir} holds a run without --restarts; use a new --output_dir")

    first_seed = FLAGS.random_seed
    results = []
    for index, seed in enumerate(range(first_seed, first_seed + restarts)):
        directory = seed_directory(output_dir, seed)
        logging.info("Restart %d/%d: seed %d in %s", index + 1, restarts, seed, directory)
        with flag_values(dict(plan.seed_flags, output_dir=directory, random_seed=seed)):
            run_once()
        _clear_session()
        metric, result = seed_result(directory, seed)
        results.append(result)
    summary = summarise(metric, results)
    io.write_json_atomically(io.join(output_dir, SUMMARY_FILE), summary)
    for line in summary_table(summary):
        logging.info("%s", line)
    if plan.predicts:
        best = summary["best"]
        logging.info("Predicting with the best seed, %d (%s = %.4f at step %d)", best["seed"],
                     summary["metric"], best[summary["metric"]], best["step"])
        with flag_values(_predict_flags(plan, output_dir, first_seed, best["output_dir"])):
            run_once()


def _predict_flags(plan: RestartPlan, output_dir: str, first_seed: int,
                   best_directory: str) -> Dict[str, object]:
    """The final run's flags: no training, the best seed's model.ckpt-best."""
    values = dict(plan.predict_flags, output_dir=output_dir, random_seed=first_seed,
                  init_checkpoint=io.join(best_directory, "model.ckpt-best"),
                  init_checkpoint_format="tf1", init_encoder_only=False,
                  **plan.carried_flags(best_directory))
    if "albert_hub_module_handle" in FLAGS:   # not a flag of run_token_classifier.py
        values["albert_hub_module_handle"] = None
    return values


def _clear_session() -> None:
    """Frees the finished seed's graphs and models before the next one."""
    keras.backend.clear_session()


def seed_result(directory: str, seed: int) -> Tuple[str, dict]:
    """(the metric that picks the best, the best evaluation) of one seed's run, from its
    eval_results.json."""
    journal_path = io.join(directory, "eval_results.json")
    journal = io.read_json(journal_path) if io.exists(journal_path) else {}
    best = journal.get("best")
    if not best:
        raise InputError(f"{directory} has no dev evaluation to compare seeds by")
    metric = journal["layout"][1]
    entry = next((e for e in journal["evaluations"] if e["step"] == best["step"]), {})
    result = {"seed": seed, "output_dir": directory, "step": best["step"],
              metric: best[metric], "degenerate": bool(entry.get("degenerate", False)),
              "degenerate_evaluations": sum(bool(e.get("degenerate"))
                                            for e in journal["evaluations"]),
              "evaluations": len(journal["evaluations"])}
    if entry.get("degenerate_reason"):
        result["degenerate_reason"] = entry["degenerate_reason"]
    return metric, result


def summarise(metric: str, results: List[dict]) -> dict:
    """restarts.json: the seeds, the metric's mean and standard deviation (n − 1), the best."""
    values = [result[metric] for result in results]
    mean = sum(values) / len(values)
    std = (math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
           if len(values) > 1 else 0.0)
    best = max(results, key=lambda result: result[metric])  # the first of equals
    return {"metric": metric, "restarts": len(results), "seeds": results, "mean": mean,
            "std": std, "degenerate_seeds": sum(r["degenerate"] for r in results),
            "best": best}


def summary_table(summary: dict) -> List[str]:
    metric = summary["metric"]
    width = max(len(metric), 8)
    lines = [f"Restarts: best dev {metric} of each seed",
             f"  {'seed':>8}  {metric:>{width}}  {'step':>7}  degenerate"]
    for result in summary["seeds"]:
        lines.append(f"  {result['seed']:>8}  {result[metric]:>{width}.4f}  {result['step']:>7}"
                     f"  {'yes' if result['degenerate'] else 'no'}")
    best: Optional[dict] = summary["best"]
    lines.append(f"  mean {summary['mean']:.4f}, std {summary['std']:.4f} (n-1), best "
                 f"{best[metric]:.4f} (seed {best['seed']}); degenerate: "
                 f"{summary['degenerate_seeds']} of {summary['restarts']}")
    return lines
