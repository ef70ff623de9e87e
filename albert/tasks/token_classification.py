"""Word tagging as a `Task` of the training loop: its cache, loss, evaluation and predictions.

Training reads the feature cache `token_train.tf_record` (`input_ids`, `input_mask`,
`segment_ids` and `label_ids`, int64 × max_seq_length; a label of -1 is left out of the loss)
as every fine-tuning task reads its cache. The loss is the mean softmax cross-entropy over
the labelled positions of the global batch. Evaluation reads the validation sentences held in
memory: each word's tag comes from its first piece in the window that gives it the most
context (`albert.finetuning_data.tagged_files`). The scores are word accuracy and, for chunk
tag sets (BIO, IOB1, BIOES), entity precision, recall and F1 as conlleval counts them. Each
is reported beside the baseline that gives every word its commonest training tag.
"""

import dataclasses
import re
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from albert import io
from albert.evaluation import tagging_metrics
from albert.finetuning_data.feature_cache import FeatureCache
from albert.finetuning_data.tagged_files import (IGNORED, Sentence, WindowFeatures, stack,
                                                 windows, word_pieces)
from albert.modeling import AlbertTokenClassifier
from albert.records.example_proto import encode_example
from albert.tasks.finetuning import (RUN_SETTINGS_FILE, TOKEN_FEATURES, FineTuningTask,
                                     bucketed_outputs, trim_to_longest)

TASK_TYPE = "token_classification"
TAGS_FILE = "tags.txt"
BASELINE_FILE = "baseline_tags.json"   # each training word's commonest tag, and the commonest
CACHE_NAME = "token_train.tf_record"
REPORT_JSON = "eval_report.json"
REPORT_MARKDOWN = "eval_report.md"


class TokenFeatureParser:
    """`parse(records, positions) -> features` of the token cache (labels `[B, S]`)."""

    def __init__(self, max_seq_length: int):
        self.spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
                     for name in (*TOKEN_FEATURES, "label_ids")}

    def __call__(self, records, positions) -> dict:
        parsed = tf.io.parse_example(records, self.spec)
        features = {model_name: tf.cast(parsed[name], tf.int32)
                    for name, model_name in TOKEN_FEATURES.items()}
        features["label_ids"] = tf.cast(parsed["label_ids"], tf.int32)
        return features


def serialize(feature: WindowFeatures, max_seq_length: int) -> bytes:
    padding = max_seq_length - len(feature.input_ids)
    return encode_example({
        "input_ids": ("int64", feature.input_ids + [0] * padding),
        "input_mask": ("int64", [1] * len(feature.input_ids) + [0] * padding),
        "segment_ids": ("int64", [0] * max_seq_length),
        "label_ids": ("int64", feature.label_ids + [IGNORED] * padding)})


@dataclasses.dataclass
class TaggedSet:
    """Sentences with their windows, for evaluation or prediction."""

    sentences: List[Sentence]
    arrays: Dict[str, np.ndarray]


def tagged_set(sentences: Sequence[Sentence], tags: Sequence[str], tokenizer,
               max_seq_length: int, label_all_pieces: bool = False) -> TaggedSet:
    index = {tag: i for i, tag in enumerate(tags)}
    features = []
    for number, sentence in enumerate(sentences):
        tag_ids = None if sentence.tags is None else [index[tag] for tag in sentence.tags]
        features += windows(number, word_pieces(sentence.words, tokenizer), tag_ids,
                            max_seq_length, tokenizer, label_all_pieces)
    return TaggedSet(list(sentences), stack(features, max_seq_length))


def training_records(sentences: Sequence[Sentence], tags: Sequence[str], tokenizer,
                     max_seq_length: int, label_all_pieces: bool):
    """Serialised windows of the training sentences, one sentence at a time."""
    index = {tag: i for i, tag in enumerate(tags)}
    for number, sentence in enumerate(sentences):
        for feature in windows(number, word_pieces(sentence.words, tokenizer),
                               [index[tag] for tag in sentence.tags], max_seq_length, tokenizer,
                               label_all_pieces):
            yield serialize(feature, max_seq_length)


def word_predictions(logits: np.ndarray, tagged: TaggedSet) -> Tuple[List[np.ndarray], List]:
    """(per sentence: each word's tag probabilities, per sentence: each word's tag index)."""
    per_sentence = [np.zeros((len(s.words), logits.shape[-1]), np.float32)
                    for s in tagged.sentences]
    rows, positions = np.nonzero(tagged.arrays["word_ids"] != IGNORED)
    scored = logits[rows, positions]   # the positions read (padding may hold -inf)
    probabilities = np.exp(scored - scored.max(axis=-1, keepdims=True))
    probabilities /= probabilities.sum(axis=-1, keepdims=True)
    for row, position, values in zip(rows, positions, probabilities):
        sentence = tagged.arrays["sentence_ids"][row]
        per_sentence[sentence][tagged.arrays["word_ids"][row, position]] = values
    return per_sentence, [p.argmax(axis=-1) for p in per_sentence]


def tag_logits(model, tagged: TaggedSet, batch_size: int, jit_compile: bool = False):
    """Logits `[windows, S, tags]` on length-sorted batches, each cut to its longest window
    (positions past a window's end hold -inf)."""
    return bucketed_outputs(model, tagged.arrays, batch_size, jit_compile,
                            position_outputs=("logits",))["logits"]


@dataclasses.dataclass(kw_only=True)
class TokenClassificationTask(FineTuningTask):
    """Fine-tuning a tagger. `tags`: the tag set in output order; `eval_set`: the validation
    sentences (None: no evaluation); `baseline`: (each training word's commonest tag, the
    commonest tag). The other arguments are `FineTuningTask`'s."""

    tags: Tuple[str, ...]
    eval_set: Optional[TaggedSet] = None
    baseline: Tuple[Dict[str, str], str] = ({}, "O")

    @property
    def chunked(self) -> bool:
        return tagging_metrics.is_chunk_tagging(self.tags)

    @property
    def best_metric(self) -> str:
        return "entity_f1" if self.chunked else "word_accuracy"

    def build_model(self):
        return AlbertTokenClassifier(self.config, len(self.tags), self.head_dropout)

    def parser(self) -> TokenFeatureParser:
        return TokenFeatureParser(self.max_seq_length)

    def run_files(self):
        files = dict(super().run_files())
        files[BASELINE_FILE] = io.json_text({"by_word": self.baseline[0],
                                             "default": self.baseline[1]})
        return files

    def train_input(self):
        # Length bucketing cuts each batch to its longest window: the labels with it.
        return dataclasses.replace(super().train_input(), trim=_trim_with_labels)

    def eval_input(self):
        return None   # evaluation reads the sentences in memory (evaluate)

    def loss_normalizers(self, features):
        return {"tokens": tf.reduce_sum(tf.cast(features["label_ids"] >= 0, tf.float32))}

    def losses(self, outputs, features, normalizers):
        labels = features["label_ids"]
        learnt = labels >= 0
        per_position = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.maximum(labels, 0), logits=outputs["logits"])
        total = tf.reduce_sum(tf.where(learnt, per_position, tf.zeros_like(per_position)))
        return {"loss": total / tf.maximum(normalizers["tokens"], 1.0)}

    def baseline_tags(self, sentences: Sequence[Sentence]) -> List[List[str]]:
        by_word, commonest = self.baseline
        return [[by_word.get(word, commonest) for word in s.words] for s in sentences]

    def evaluate(self, model, config, strategy=None):
        if self.eval_set is None:
            return None
        result = self.scores(model, config.eval_batch_size, config.jit_compile)
        return result["metrics"]

    def scores(self, model, batch_size: int, jit_compile: bool = False) -> dict:
        """Metrics, the predicted tags and the confusion matrix on the validation set."""
        logits = tag_logits(model, self.eval_set, batch_size, jit_compile)
        _, predicted = word_predictions(logits, self.eval_set)
        gold = [list(s.tags) for s in self.eval_set.sentences]
        tags = [[self.tags[i] for i in sentence] for sentence in predicted]
        arrays = self.eval_set.arrays
        learnt = arrays["word_ids"] != IGNORED
        loss = _cross_entropy(logits[learnt], arrays["label_ids"][learnt])
        metrics = tagging_metrics.tagging_metrics(
            gold, tags, self.baseline_tags(self.eval_set.sentences), loss)
        flat_gold = [tag for s in gold for tag in s]
        flat_predicted = [tag for s in tags for tag in s]
        return {"metrics": metrics, "predicted": tags,
                "confusion_matrix": tagging_metrics.confusion(flat_gold, flat_predicted,
                                                              self.tags),
                "entities": (tagging_metrics.entity_scores(gold, tags) if self.chunked
                             else None)}


def tagged_text(text: str, tags, probabilities) -> dict:
    """Raw text's words (whitespace-separated, with character offsets), tags and entities."""
    spans = [(m.group(0), m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    words = [{"word": word, "start": start, "end": end, "tag": tag, "probability": p}
             for (word, start, end), tag, p in zip(spans, tags, probabilities)]
    found = []
    if tagging_metrics.is_chunk_tagging(sorted(set(tags) | {"O", "B-X"})):
        for kind, first, last in sorted(tagging_metrics.entities([list(tags)]), key=lambda e: e[1]):
            start, end = spans[first][1], spans[last][2]
            found.append({"type": kind, "start": start, "end": end, "text": text[start:end]})
    return {"text": text, "words": words, "entities": found}


def _trim_with_labels(features: dict) -> dict:
    trimmed = trim_to_longest(features)
    length = tf.shape(trimmed["input_mask"])[-1]
    trimmed["label_ids"] = features["label_ids"][:, :length]
    return trimmed


def _cross_entropy(logits: np.ndarray, labels: np.ndarray) -> float:
    logits = logits.astype(np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probabilities = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return float(-np.mean(log_probabilities[np.arange(len(labels)), labels])) if len(labels) else 0.0


def write_report(output_dir: str, task: TokenClassificationTask, scores: dict,
                 checkpoint: str) -> List[str]:
    """eval_report.json and eval_report.md of one evaluation (the best checkpoint's)."""
    metrics = scores["metrics"]
    report = {"checkpoint": checkpoint, "tags": list(task.tags), "metrics": metrics,
              "entities": scores["entities"], "confusion_matrix": scores["confusion_matrix"],
              "words": int(sum(len(s.words) for s in task.eval_set.sentences)),
              "sentences": len(task.eval_set.sentences)}
    lines = [f"# Evaluation of {checkpoint}", "",
             f"{report['sentences']:,} sentences, {report['words']:,} words.", "",
             "| metric | value | baseline (each word's commonest training tag) |", "|---|---|---|",
             f"| word accuracy | {metrics['word_accuracy']:.4f} | "
             f"{metrics['baseline_word_accuracy']:.4f} |"]
    if scores["entities"]:
        lines.append(f"| entity F1 | {metrics['entity_f1']:.4f} | "
                     f"{metrics['baseline_entity_f1']:.4f} |")
        lines += ["", "| entity type | precision | recall | F1 | entities |", "|---|---|---|---|---|"]
        for kind, values in scores["entities"].items():
            lines.append(f"| {kind} | {values['precision']:.4f} | {values['recall']:.4f} | "
                         f"{values['f1']:.4f} | {values['support']:,} |")
    lines += ["", "Confusion matrix over words (rows: true tag, columns: predicted tag):", "",
              "| true \\ predicted | " + " | ".join(task.tags) + " |",
              "|---|" + "---|" * len(task.tags)]
    for tag, row in zip(task.tags, scores["confusion_matrix"]):
        lines.append(f"| {tag} | " + " | ".join(f"{v:,}" for v in row) + " |")
    paths = [io.join(output_dir, REPORT_JSON), io.join(output_dir, REPORT_MARKDOWN)]
    io.write_json_atomically(paths[0], report)
    io.write_text_atomically(paths[1], "\n".join(lines) + "\n")
    return paths


def plan_cache(path: str, settings: dict, sentences: Sequence[Sentence]) -> FeatureCache:
    return FeatureCache.plan(path, settings, lambda: list(sentences))
