"""`python -m albert.squad evaluate DATA.json PRED.json [--na_prob_file=NA.json]`: official scores.

Prints the official evaluation scripts' JSON: for SQuAD v1.1
`{"exact_match", "f1"}`; for v2.0 `exact`, `f1`, `total`, `HasAns_*`,
`NoAns_*` and, with a no-answer probability file (e.g. run_squad.py's
null_odds.json), `best_exact`, `best_f1` and their thresholds. The version
comes from the data file (`"version"`, or any `is_impossible` question);
`--version` overrides it.
"""

import argparse
import json
import sys

from albert import io
from albert.errors import InputError
from albert.evaluation import squad_metrics
from albert.finetuning_data.squad import load_squad_json


def _read_json(path: str, what: str):
    try:
        return json.loads(io.read_text(path))
    except OSError as error:
        raise InputError(f"Cannot read {what} {path}: {error.strerror or error}") from None
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: not valid JSON ({error.msg}, line {error.lineno})") from None


def evaluate_files(data_file: str, prediction_file: str, na_prob_file=None,
                   na_prob_thresh: float = 1.0, version: str = "auto") -> dict:
    document = load_squad_json(data_file)
    predictions = _read_json(prediction_file, "prediction file")
    if not isinstance(predictions, dict):
        raise InputError(f"{prediction_file}: expected a JSON object of question id → answer")
    version_2 = (squad_metrics.is_version_2(document) if version == "auto"
                 else version.startswith("2"))

    def warn(message):
        print(message, file=sys.stderr)

    if not version_2:
        return squad_metrics.evaluate_v1(document["data"], predictions, warn=warn)
    na_probs = _read_json(na_prob_file, "no-answer probability file") if na_prob_file else None
    if na_probs is not None:
        missing = [qid for qid in predictions if qid not in na_probs]
        if missing:
            raise InputError(f"{na_prob_file} has no probability for {len(missing)} predicted "
                             f"questions (e.g. {missing[0]})")
    return squad_metrics.evaluate_v2(document["data"], predictions, na_probs, na_prob_thresh,
                                     warn=warn)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m albert.squad",
                                     description="Official SQuAD v1.1 / v2.0 scores.")
    commands = parser.add_subparsers(dest="command", required=True)
    evaluate = commands.add_parser("evaluate", help="Score a predictions.json.")
    evaluate.add_argument("data_file", help="The SQuAD JSON with the gold answers.")
    evaluate.add_argument("pred_file", help="Predictions: question id → answer text.")
    evaluate.add_argument("--na_prob_file", "--na-prob-file", default=None,
                          help="v2.0: question id → no-answer probability (e.g. null_odds.json).")
    evaluate.add_argument("--na_prob_thresh", "--na-prob-thresh", type=float, default=1.0,
                          help="v2.0: predict no answer above this probability (default 1.0).")
    evaluate.add_argument("--version", choices=["auto", "1.1", "2.0"], default="auto")
    args = parser.parse_args(argv)
    try:
        result = evaluate_files(args.data_file, args.pred_file, args.na_prob_file,
                                args.na_prob_thresh, args.version)
    except InputError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2) if "total" in result else json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
