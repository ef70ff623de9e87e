"""GLUE fine-tuning speed on short real sentences: ours vs Hugging Face and Model Garden.

    python benchmarks/finetuning_speed.py          # ALBERT-base, max_seq_length 512

Data: the 200 movie-review sentences of Pang & Lee's polarity data (shipped
in the gensim wheel; SST-2's domain and length distribution), tokenized
with a SentencePiece model trained on the demo corpus, as SST-2 features at
the paper's `max_seq_length=512`.

Evaluation examples/s, each implementation in its own process, same weights
(converted with our name table) and batch size:
* ours: `run_classifier.py`'s evaluation path — length-bucketed batches cut
  to their longest example, results restored to file order;
* Hugging Face `AlbertForSequenceClassification` (SDPA) in eager PyTorch, batches
  padded to 512 as its `run_glue.py` does by default (`pad_to_max_length`): `hf`;
* the same with batches sorted by length and padded to their longest, what
  `group_by_length` with dynamic padding gives, its fastest float32 CPU setting:
  `hf_sorted` (`benchmarks/inference_speed.py` compares against it at more
  precisions and with quantisation);
* Model Garden: its `AlbertEncoder` + a dense classifier on the pooled
  output in a `tf.function`, padded to 512 as its GLUE data loader does.

Training steps/s, ours, with `--bucket_by_length` and without, through the
training loop's input path.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from inference_speed import sorted_batches

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def prepare(work_dir: str, max_seq_length: int) -> str:
    """SST-2 features of the polarity sentences, saved as .npz; returns its path."""
    from albert.finetuning_data.glue import TASKS, InputExample, convert_examples
    from albert.datasets import sources
    from albert.datasets.demo_corpus import build_demo_corpus
    from albert.datasets.glue_demo import polarity_sentences
    from albert.tokenization import SentencePieceTokenizer
    from albert.tokenization.training import train_sentencepiece

    path = os.path.join(work_dir, f"sst2_{max_seq_length}.npz")
    if os.path.exists(path):
        return path
    corpus = os.path.join(work_dir, "corpus")
    build_demo_corpus(corpus)
    prefix = os.path.join(work_dir, "spm8000")
    if not os.path.exists(prefix + ".model"):
        train_sentencepiece([os.path.join(corpus, "train.txt")], prefix, vocab_size=8000)
    tokenizer = SentencePieceTokenizer(prefix + ".model")
    sentences = polarity_sentences(sources.gensim_file(sources.PANG_LEE_POLARITY))
    examples = [InputExample(str(i), tokenizer.preprocess(s), None, y)
                for i, (s, y) in enumerate(sentences)]
    features = convert_examples(examples, TASKS["sst-2"], max_seq_length, tokenizer)
    np.savez(path, input_word_ids=np.array([f.input_ids for f in features], np.int32),
             input_mask=np.array([f.input_mask for f in features], np.int32),
             input_type_ids=np.array([f.segment_ids for f in features], np.int32),
             label_ids=np.array([f.label_id for f in features], np.int32))
    return path


def _model_and_weights(config_path):
    import keras

    from albert.checkpoints import model_weights
    from albert.config import AlbertConfig
    from albert.modeling import AlbertClassifier

    keras.utils.set_random_seed(0)
    config = AlbertConfig.from_json_file(config_path)
    model = AlbertClassifier(config, num_labels=2)
    return config, model, model_weights(model)


def eval_ours(args, features):
    from albert.tasks.finetuning import bucketed_logits

    _, model, _ = _model_and_weights(args.config)
    bucketed_logits(model, {k: v[:args.batch_size] for k, v in features.items()}, args.batch_size)
    start = time.perf_counter()
    bucketed_logits(model, features, args.batch_size)
    return len(features["input_mask"]) / (time.perf_counter() - start)


def eval_hf(args, features, sorted_padding=False):
    import torch
    import transformers

    from albert.checkpoints import write_checkpoint

    config, _, weights = _model_and_weights(args.config)
    directory = tempfile.mkdtemp()
    write_checkpoint(weights, config, directory, "hf")
    model = transformers.AlbertForSequenceClassification.from_pretrained(
        directory, attn_implementation="sdpa")
    model.eval()
    total = len(features["input_mask"])

    def batches(count):
        subset = {name: values[:count] for name, values in features.items()}
        if sorted_padding:
            return sorted_batches(subset, args.batch_size)
        width = features["input_mask"].shape[1]
        return ((np.arange(start, min(start + args.batch_size, count)), width)
                for start in range(0, count, args.batch_size))

    def run(count):
        with torch.no_grad():
            for rows, width in batches(count):
                model(**{name: torch.tensor(features[key][rows][:, :width], dtype=torch.long)
                         for name, key in (("input_ids", "input_word_ids"),
                                           ("attention_mask", "input_mask"),
                                           ("token_type_ids", "input_type_ids"))})

    run(args.batch_size)
    start = time.perf_counter()
    run(total)
    return total / (time.perf_counter() - start)


def eval_model_garden(args, features):
    import tensorflow as tf
    import tf_keras

    from albert.checkpoints.model_garden import assign_to_model_garden, build_model_garden_encoder

    config, _, weights = _model_and_weights(args.config)
    encoder = build_model_garden_encoder(config)
    assign_to_model_garden(encoder, weights, config)
    classifier = tf_keras.layers.Dense(2)

    @tf.function
    def logits(ids, mask, types):
        return classifier(encoder({"input_word_ids": ids, "input_mask": mask,
                                   "input_type_ids": types})["pooled_output"])

    total = len(features["input_mask"])

    def run(count):
        for start in range(0, count, args.batch_size):
            rows = slice(start, min(start + args.batch_size, count))
            logits(*(tf.constant(features[k][rows])
                     for k in ("input_word_ids", "input_mask", "input_type_ids"))).numpy()

    run(args.batch_size)
    start = time.perf_counter()
    run(total)
    return total / (time.perf_counter() - start)


def train_ours(args, features, bucketed):
    import tensorflow as tf

    from albert.finetuning_data.glue import TASKS, InputFeatures, serialize_features
    from albert.tasks.classification import ClassificationTask

    config, _, _ = _model_and_weights(args.config)
    directory = tempfile.mkdtemp()
    cache = os.path.join(directory, "sst-2_train.tf_record")
    with tf.io.TFRecordWriter(cache) as writer:
        for row in range(len(features["input_mask"])):
            writer.write(serialize_features(InputFeatures(
                features["input_word_ids"][row].tolist(), features["input_mask"][row].tolist(),
                features["input_type_ids"][row].tolist(), int(features["label_ids"][row]), 0),
                regression=False))
    task = ClassificationTask(config=config, glue_task=TASKS["sst-2"],
                              max_seq_length=args.max_seq_length, train_cache=cache,
                              train_records=len(features["input_mask"]))
    return loop_steps_per_second(task, directory, args.batch_size, args.train_steps,
                                 warmup_steps=2, bucket_window=10 if bucketed else 0,
                                 learning_rate=1e-5)


def loop_steps_per_second(task, directory: str, batch_size: int, train_steps: int,
                          warmup_steps: int, bucket_window: int, learning_rate: float) -> float:
    """Training steps/s of `task` through the training loop and its input pipeline (AdamW):
    `warmup_steps` first, then `train_steps` timed in one call."""
    import tensorflow as tf

    from albert.training.distribute import create_strategy
    from albert.training.inputs import distributed_training_dataset
    from albert.training.loop import Trainer, TrainerConfig, variable_names_for
    from albert.training.optimization import create_optimizer

    trainer = Trainer(task, create_strategy("one_device"),
                      TrainerConfig(directory, 10 ** 6, batch_size, steps_per_loop=train_steps,
                                    bucket_window=bucket_window),
                      lambda names: create_optimizer("adamw", learning_rate, 10 ** 6, 0,
                                                     variable_names=names,
                                                     gradients_summed_by_caller=True),
                      variable_names_for)
    model, optimizer = trainer.build()
    dataset = distributed_training_dataset(trainer.strategy, task.train_input(), batch_size,
                                           0, 0, bucket_window=bucket_window)
    steps = trainer.training_steps(model, optimizer, iter(dataset))
    steps(tf.constant(warmup_steps))
    start = time.perf_counter()
    float(steps(tf.constant(train_steps))["loss"][-1])
    return train_steps / (time.perf_counter() - start)


def measure(args):
    features = dict(np.load(prepare(args.work_dir, args.max_seq_length)))
    runners = {"ours": lambda: eval_ours(args, features), "hf": lambda: eval_hf(args, features),
               "hf_sorted": lambda: eval_hf(args, features, sorted_padding=True),
               "model_garden": lambda: eval_model_garden(args, features),
               "train": lambda: train_ours(args, features, bucketed=False),
               "train_bucketed": lambda: train_ours(args, features, bucketed=True)}
    print(json.dumps({"rate": runners[args.impl]()}))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=os.path.join(REPO, "configs", "albert_base_v2.json"))
    parser.add_argument("--max_seq_length", type=int, default=512)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--train_steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(),
                                                           "albert-finetuning-bench"))
    parser.add_argument("--impl", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    if args.impl:
        measure(args)
        return
    prepare(args.work_dir, args.max_seq_length)
    base = [sys.executable, os.path.abspath(__file__), f"--config={args.config}",
            f"--max_seq_length={args.max_seq_length}", f"--batch_size={args.batch_size}",
            f"--train_steps={args.train_steps}", f"--work_dir={args.work_dir}"]
    names = ("ours", "hf", "hf_sorted", "model_garden", "train", "train_bucketed")
    results = {name: [] for name in names}
    for _ in range(args.rounds):
        for name in names:
            output = subprocess.run(base + [f"--impl={name}"], capture_output=True, text=True)
            if output.returncode != 0:
                raise RuntimeError(output.stderr[-3000:])
            results[name].append(json.loads(output.stdout.strip().splitlines()[-1])["rate"])
    rates = {name: statistics.median(values) for name, values in results.items()}
    report = {
        "config": args.config, "max_seq_length": args.max_seq_length,
        "batch_size": args.batch_size,
        "evaluation_examples_per_second": {k: rates[k] for k in ("ours", "hf", "hf_sorted",
                                                                 "model_garden")},
        "ours_vs_hf": rates["ours"] / rates["hf"],
        "ours_vs_hf_sorted": rates["ours"] / rates["hf_sorted"],
        "ours_vs_model_garden": rates["ours"] / rates["model_garden"],
        "training_steps_per_second": {"padded": rates["train"],
                                      "bucket_by_length": rates["train_bucketed"]},
        "bucketed_vs_padded_training": rates["train_bucketed"] / rates["train"]}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
