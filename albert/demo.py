"""The end-to-end demo: real text -> vocabulary -> pretraining data -> a small pretrained ALBERT.

    python -m albert.demo --output_dir=albert_demo

Runs the project's own command-line tools, printing each command:

1. `python -m albert.datasets demo-corpus`: English prose from the gensim
   4.4.0 wheel (Wikipedia sample + news), held-out news documents apart;
2. `python -m albert.tokenization train`: a SentencePiece vocabulary with the
   official ALBERT recipe;
3. `create_pretraining_data.py`: TFRecords for training and for held-out
   evaluation (sentence-order pairs; the summary printed at the end compares
   the sentence-order accuracy with the held-out set's majority share);
4. `run_pretraining.py`: a few minutes of MLM + SOP pretraining of a small
   ALBERT with LAMB, evaluated on the held-out data at every checkpoint;
5. `python -m albert.datasets glue-demo`: real labelled text (Pang & Lee's
   movie-review polarity as CSV files with string labels, Lee et al.'s
   document-similarity ratings in STS-B's GLUE format);
6. `run_classifier.py`: fine-tunes the pretrained model on both, the reviews
   from the CSV files (`--train_file`, docs/your_data.md) and the pairs as
   STS-B, evaluating every checkpoint on dev; the dev metrics are printed
   beside a majority-class / mean-prediction baseline, and
   `python -m albert.predict` labels the reviews' test file from the run
   directory alone;
7. `python -m albert.paper params`: the paper's parameter tables.

Everything is cached under --output_dir; re-running resumes. Nothing is
downloaded.
"""

import argparse
import csv
import os
import shlex
import subprocess
import sys

from albert import io
from albert.evaluation.chance import ABOVE_CHANCE_STANDARD_ERRORS, LabelCounts
from albert.training.cpu_features import resolve_mixed_precision
from albert.training.run_directory import read_train_log

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A small ALBERT: factorised embeddings (E < H), all layers sharing one block.
DEMO_CONFIG = {
    "embedding_size": 64, "hidden_size": 128, "num_hidden_layers": 4, "num_hidden_groups": 1,
    "inner_group_num": 1, "num_attention_heads": 4, "intermediate_size": 512,
    "hidden_act": "gelu", "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
    "max_position_embeddings": 128, "type_vocab_size": 2, "initializer_range": 0.02,
}

# create_pretraining_data.py flags of the demo's records besides length and vocabulary: five
# passes over the training text; held-out pairs never take their second segment from another
# document, so every held-out pair is a sentence-order question.
RECORD_FLAGS = {"train": ["--dupe_factor=5"],
                "heldout": ["--dupe_factor=4", "--nosingle_segment_random_document"]}


def masked_predictions(max_seq_length: int, masked_lm_prob: float = 0.15) -> int:
    """--max_predictions_per_seq for a masking budget: that share of the sequence's pieces."""
    return max(1, round(max_seq_length * masked_lm_prob))


def run(command, env=None):
    printable = " ".join(shlex.quote(part) for part in command)
    print(f"\n$ {printable}", flush=True)
    result = subprocess.run(command, cwd=REPO, env=env)
    if result.returncode != 0:
        sys.exit(f"demo step failed (exit {result.returncode}): {printable}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m albert.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", default="albert_demo")
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--max_seq_length", type=int, default=64)
    # The small-hardware recipe of docs/pretraining.md: LAMB 0.01 at batch 64, 10 % warm-up.
    parser.add_argument("--num_train_steps", type=int, default=1500)
    parser.add_argument("--train_batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=0.01,
                        help="LAMB's peak rate (about 0.01 × sqrt(batch / 64) in our measurements)")
    parser.add_argument("--mixed_precision", choices=("auto", "none", "mixed_bfloat16"),
                        default="auto",
                        help="auto: mixed_bfloat16 when this CPU computes bfloat16 natively "
                             "(AVX-512 BF16 or AMX), measured 1.2x faster there; none otherwise")
    parser.add_argument("--finetuning_steps", type=int, default=300)
    args = parser.parse_args(argv)

    out = os.path.abspath(args.output_dir)
    python = sys.executable
    corpus, vocab, data, run_dir = (os.path.join(out, name) for name in
                                    ("corpus", "vocab", "data", "pretraining"))
    predictions = masked_predictions(args.max_seq_length)

    run([python, "-m", "albert.datasets", "demo-corpus", f"--output_dir={corpus}"])
    spm_prefix = os.path.join(vocab, f"spm{args.vocab_size}")
    if not os.path.exists(spm_prefix + ".model"):
        run([python, "-m", "albert.tokenization", "train", f"--input={corpus}/train.txt",
             f"--model_prefix={spm_prefix}", f"--vocab_size={args.vocab_size}"])
    for split, extra in RECORD_FLAGS.items():
        target = os.path.join(data, f"{split}.tfrecord")
        if not os.path.exists(target):
            run([python, "create_pretraining_data.py", f"--input_file={corpus}/{split}.txt",
                 f"--output_file={target}", f"--spm_model_file={spm_prefix}.model",
                 f"--max_seq_length={args.max_seq_length}",
                 f"--max_predictions_per_seq={predictions}", *extra])
    config_file = os.path.join(out, "albert_config.json")
    io.write_json_atomically(config_file, dict(DEMO_CONFIG, vocab_size=args.vocab_size))
    run([python, "run_pretraining.py", f"--albert_config_file={config_file}",
         f"--input_file={data}/train.tfrecord", f"--eval_file={data}/heldout.tfrecord",
         f"--output_dir={run_dir}",
         f"--train_batch_size={args.train_batch_size}",
         f"--num_train_steps={args.num_train_steps}",
         f"--num_warmup_steps={args.num_train_steps // 10}", f"--learning_rate={args.learning_rate}",
         f"--mixed_precision={pretraining_precision(args.mixed_precision)}",
         f"--save_checkpoints_steps={max(args.num_train_steps // 5, 1)}", "--do_eval",
         # The whole held-out set (about 4,000 pairs): its standard error is what tells a
         # learned sentence order from chance.
         "--eval_batch_size=256", "--max_eval_steps=1000000", "--steps_per_loop=50"])
    glue_dir = os.path.join(out, "glue")
    run([python, "-m", "albert.datasets", "glue-demo", f"--output_dir={glue_dir}"])
    fine_tuned = {}
    # Movie-review polarity from the user's-own-files path (a CSV with string labels), then
    # the STS-B-format similarity pairs through the GLUE path.
    reviews = os.path.join(glue_dir, "reviews")
    for task, task_flags in (("reviews", [f"--train_file={reviews}/train.csv",
                                          f"--validation_file={reviews}/dev.csv",
                                          "--text_columns=review", "--label_column=sentiment"]),
                             ("STS-B", ["--task_name=STS-B", f"--data_dir={glue_dir}"])):
        fine_tuned[task] = os.path.join(out, f"finetuning-{task}")
        run([python, "run_classifier.py", *task_flags, f"--albert_config_file={config_file}",
             f"--init_checkpoint={run_dir}/model.ckpt-best",
             f"--spm_model_file={spm_prefix}.model", f"--output_dir={fine_tuned[task]}",
             f"--max_seq_length={args.max_seq_length}", "--do_train", "--do_eval",
             *(["--do_predict"] if task == "STS-B" else []),
             "--train_batch_size=16", "--eval_batch_size=64", "--learning_rate=1e-4",
             f"--train_step={args.finetuning_steps}",
             f"--warmup_step={args.finetuning_steps // 10}",
             f"--save_checkpoints_steps={max(args.finetuning_steps // 6, 1)}"])
    # New text through the finished run directory alone (a second run reuses the first's file).
    predicted = os.path.join(fine_tuned["reviews"], "predicted-test.csv")
    if not os.path.exists(predicted):
        run([python, "-m", "albert.predict", f"--model_dir={fine_tuned['reviews']}",
             f"--input_file={reviews}/test.csv", f"--output_file={predicted}"])
    run([python, "-m", "albert.paper", "params"])

    results = io.read_json(os.path.join(run_dir, "eval_results.json"))
    log = read_train_log(run_dir)
    first = sum(r["masked_lm_loss"] for r in log[:50]) / len(log[:50])
    last = sum(r["masked_lm_loss"] for r in log[-50:]) / len(log[-50:])
    final = results["evaluations"][-1]
    print("\nDemo finished.")
    print(f"  training MLM loss: {first:.3f} (first 50 steps) -> {last:.3f} (last 50 steps)")
    print(f"  held-out at step {final['step']}: masked_lm_accuracy {final['masked_lm_accuracy']:.4f}, "
          f"sentence_order_accuracy {final['sentence_order_accuracy']:.4f}")
    print_sentence_order_vs_chance(results["evaluations"],
                                   os.path.join(data, "heldout.tfrecord.summary.json"))
    print(f"  checkpoints: {run_dir} (model.ckpt-best by masked_lm_accuracy)")
    print(f"  TensorBoard: tensorboard --logdir={os.path.join(run_dir, 'tensorboard')}")
    print_finetuning(glue_dir, fine_tuned)


def pretraining_precision(choice: str) -> str:
    """The --mixed_precision of the demo's pretraining; "auto" asks this CPU, never assumes."""
    return resolve_mixed_precision(choice)


def print_sentence_order_vs_chance(evaluations: list, heldout_summary: str) -> None:
    """Sentence-order accuracy at every checkpoint against the held-out set's majority share."""
    summary = io.read_json(heldout_summary)  # create_pretraining_data.py counted the labels
    labels = summary["sentence_order_labels"]
    counts = LabelCounts(ones=labels["1"], total=labels["0"] + labels["1"])
    margins = [(e["step"], e["sentence_order_accuracy"], counts.margin(e["sentence_order_accuracy"]))
               for e in evaluations]
    print(f"  held-out sentence order against chance ({counts.majority_share:.4f}: always "
          f"answering the commoner label of {counts.total} pairs), each checkpoint's accuracy "
          "with (in brackets) how many standard errors it lies above chance; 3 or more is "
          f"above chance: " + ", ".join(f"step {step} {accuracy:.3f} ({margin:+.1f})"
                                       for step, accuracy, margin in margins))
    if margins[-1][2] < ABOVE_CHANCE_STANDARD_ERRORS:
        print(f"  at the last checkpoint the sentence order is not above chance (less than "
              f"{ABOVE_CHANCE_STANDARD_ERRORS:g} standard errors). Measured on this corpus: "
              "held-out sentence order peaks around 1,000 steps and then falls as the head "
              "memorises the demo corpus's pairs; it takes more text (python -m albert.datasets "
              "larger-corpus) and longer runs (docs/paper.md, Table 5 at cpu scale)")


def _dev_labels(glue_dir: str, task: str) -> list:
    with open(os.path.join(glue_dir, task, "dev.tsv"), encoding="utf-8") as handle:
        rows = [line.rstrip("\n").split("\t") for line in handle][1:]
    return [row[-1] for row in rows]


def _test_accuracy(predicted: str) -> tuple:
    """(accuracy, examples) of albert.predict's file against its own `sentiment` column."""
    with open(predicted, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return sum(row["prediction"] == row["sentiment"] for row in rows) / len(rows), len(rows)


def print_finetuning(glue_dir: str, fine_tuned: dict) -> None:
    """Best dev metrics of the fine-tuned models beside what a constant guess scores."""
    report = io.read_json(os.path.join(fine_tuned["reviews"], "eval_report.json"))
    print(f"  movie-review polarity from CSV files ({report['examples']} dev sentences; "
          f"docs/your_data.md): best dev accuracy {report['accuracy']:.3f}, macro-F1 "
          f"{report['macro_f1']:.3f}; always answering the commonest training label "
          f"({report['baseline_label']}) {report['baseline_accuracy']:.3f}")
    predicted = os.path.join(fine_tuned["reviews"], "predicted-test.csv")
    if os.path.exists(predicted):
        accuracy, examples = _test_accuracy(predicted)
        print(f"    python -m albert.predict on the {examples} test sentences: accuracy "
              f"{accuracy:.3f} ({predicted})")
    print("    " + beats_baseline("reviews", report["accuracy"] > report["baseline_accuracy"],
                                  "always answering the commonest label"))
    stsb_results = io.read_json(os.path.join(fine_tuned["STS-B"], "eval_results.json"))
    best = stsb_results["best"]
    scores = [float(label) for label in _dev_labels(glue_dir, "STS-B")]
    with open(os.path.join(glue_dir, "STS-B", "train.tsv"), encoding="utf-8") as handle:
        train = [float(row.split("\t")[-1]) for row in handle.read().splitlines()[1:]]
    mean = sum(train) / len(train)
    baseline_mse = sum((score - mean) ** 2 for score in scores) / len(scores)
    at_best = next(e for e in stsb_results["evaluations"] if e["step"] == best["step"])
    print(f"  STS-B format (document-pair similarity, {len(scores)} dev pairs): best dev Pearson "
          f"{best['pearson']:.3f} (Spearman {at_best['spearman']:.3f}, MSE {at_best['MSE']:.3f}) "
          f"at step {best['step']}; predicting the train mean: Pearson undefined (0), MSE "
          f"{baseline_mse:.3f}")
    print("    " + beats_baseline("STS-B", best["pearson"] > 0 and at_best["MSE"] < baseline_mse,
                                  "predicting the train mean (a positive Pearson and a lower "
                                  "MSE)"))


def beats_baseline(task: str, beaten: bool, baseline: str) -> str:
    """One plain sentence on whether a fine-tuned model did better than a constant guess."""
    if beaten:
        return f"{task}: above its baseline, {baseline}."
    return (f"{task}: NOT above its baseline, {baseline}: this fine-tuning learned nothing "
            "the dev set can tell from a constant guess (the demo's model is small and briefly "
            "pretrained, and its training set small).")


if __name__ == "__main__":
    main()
