"""How far quantised TFLite classifiers agree with float32 on trained models and real dev files.

    python benchmarks/quantized_agreement.py \
        --finetuned_dirs=runs/a/finetuning-SST-2,runs/a/finetuning-STS-B \
        --data_dir=glue-demo --spm_model_file=vocab/spm8000.model \
        --calibration_file=heldout.txt --output=results.json

Random weights say little here (their logits sit near zero, so any rounding
flips a prediction), so this runs on classifiers `run_classifier.py` has
fine-tuned: for each directory (its `model.ckpt-best`, task and sequence
length from its `run_settings.json`) and each `--modes` value it runs the
export command a user runs,

    python -m albert.export --task=classifier --tflite --quantize=MODE
        --calibration_file=... --task_name=TASK --data_dir=...

and collects from each `quantization_report.json`: the file's size against
float32, the logits' errors and prediction agreement on the calibration
file's report half, and the task's dev-set metrics computed by the float32
model and by the file, with their agreement.
"""

import argparse
import json
import os
import subprocess
import sys

from report_output import print_and_write

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def run_name(finetuned_dir: str) -> str:
    """`<pretraining run>/<fine-tuning dir>`: unique where two runs fine-tuned the same task."""
    finetuned_dir = os.path.abspath(finetuned_dir)
    return f"{os.path.basename(os.path.dirname(finetuned_dir))}/{os.path.basename(finetuned_dir)}"


def export(finetuned_dir: str, mode: str, args) -> dict:
    with open(os.path.join(finetuned_dir, "run_settings.json"), encoding="utf-8") as handle:
        settings = json.load(handle)
    export_dir = os.path.join(args.work_dir, run_name(finetuned_dir), mode)
    report_path = os.path.join(export_dir, "quantization_report.json")
    if not os.path.exists(report_path):
        command = [sys.executable, "-m", "albert.export",
                   f"--init_checkpoint={os.path.join(finetuned_dir, 'model.ckpt-best')}",
                   f"--albert_config_file={os.path.join(finetuned_dir, 'albert_config.json')}",
                   f"--spm_model_file={args.spm_model_file}", f"--export_dir={export_dir}",
                   "--task=classifier", "--tflite", f"--quantize={mode}",
                   f"--seq_length={settings['max_seq_length']}",
                   f"--calibration_file={args.calibration_file}",
                   f"--task_name={settings['task']}", f"--data_dir={args.data_dir}",
                   # The benchmark's own directory: an export stopped before its report is redone.
                   "--overwrite"]
        result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)}\n{result.stderr[-3000:]}")
    with open(report_path, encoding="utf-8") as handle:
        return json.load(handle)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--finetuned_dirs", required=True,
                        help="comma-separated run_classifier.py output directories")
    parser.add_argument("--data_dir", required=True, help="the GLUE-format tasks' directory")
    parser.add_argument("--spm_model_file", required=True)
    parser.add_argument("--calibration_file", required=True,
                        help="text like the task's, one example per line")
    parser.add_argument("--modes", default="float16,dynamic_int8,int8")
    parser.add_argument("--work_dir", required=True, help="where the exports are written")
    parser.add_argument("--output", default=None, help="also write the report here (JSON)")
    args = parser.parse_args()
    # The exports run from the repository's directory: every path made absolute first.
    for name in ("data_dir", "spm_model_file", "calibration_file", "work_dir"):
        setattr(args, name, os.path.abspath(getattr(args, name)))
    results = {}
    for finetuned_dir in map(os.path.abspath, args.finetuned_dirs.split(",")):
        for mode in args.modes.split(","):
            report = export(finetuned_dir, mode, args)
            name = run_name(finetuned_dir)
            results.setdefault(name, {})[mode] = {
                key: report[key] for key in ("file_to_float32_file", "examples", "outputs",
                                             "prediction_agreement", "dev_set") if key in report}
            print(f"{name} {mode}: agreement {report.get('prediction_agreement')}, dev set "
                  f"{json.dumps(report.get('dev_set', {}).get('prediction_agreement'))}",
                  file=sys.stderr, flush=True)
    print_and_write(results, args.output)


if __name__ == "__main__":
    main()
