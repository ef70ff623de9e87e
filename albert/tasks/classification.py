"""GLUE fine-tuning as a `Task` of the training loop, and prediction from a fine-tuned model.

Training reads the feature cache (`<task>_train.tf_record`) through the
loop's one input path. Evaluation and prediction run on length-bucketed
batches: examples are sorted by their number of real tokens, batched, and
each batch is cut to its longest example (padding never changes the outputs
at real positions: padded keys get −10000 before the softmax), then the
results are put back in file order. Most GLUE sentences are far shorter
than `max_seq_length`, so this is several times faster than padded batches
and gives the same numbers.
"""

import dataclasses
import logging
import weakref
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from albert.checkpoints import ALBERT_CONFIG_FILE
from albert.config import AlbertConfig
from albert.data.glue import GlueTask, InputFeatures, feature_schema
from albert.data.streams import RecordSource
from albert.evaluation.glue_metrics import glue_metrics
from albert.modeling import AlbertClassifier
from albert.training.inputs import TaskInput
from albert.training.loop import Task

logger = logging.getLogger("albert")

MODEL_INPUT_NAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}


class GlueParser:
    """`parse(records, positions) -> features` for GLUE feature caches."""

    def __init__(self, max_seq_length: int, regression: bool):
        self.spec = {name: tf.io.FixedLenFeature([length],
                                                 tf.float32 if kind == "float" else tf.int64)
                     for name, (kind, length) in feature_schema(max_seq_length, regression).items()}

    def __call__(self, records, positions) -> dict:
        parsed = tf.io.parse_example(records, self.spec)
        features = {MODEL_INPUT_NAMES.get(name, name):
                    tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
                    for name, value in parsed.items()}
        features["label_ids"] = tf.reshape(features["label_ids"], [-1])
        features["is_real_example"] = tf.reshape(features["is_real_example"], [-1])
        return features


def record_lengths(max_seq_length: int):
    """`lengths(records)`: real tokens of each serialised record (for length bucketing)."""
    spec = {"input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64)}

    def lengths(records):
        return tf.cast(tf.reduce_sum(tf.io.parse_example(records, spec)["input_mask"], axis=1),
                       tf.int32)

    return lengths


def trim_to_longest(features: dict) -> dict:
    """The batch's token features cut to its longest example (padding changes no output)."""
    length = tf.reduce_max(tf.reduce_sum(features["input_mask"], axis=1))
    trimmed = dict(features)
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        trimmed[name] = features[name][:, :length]
    return trimmed


def features_from_cache(path: str, max_seq_length: int, regression: bool) -> Dict[str, np.ndarray]:
    """Every record of a feature cache, as numpy arrays (file order)."""
    parser = GlueParser(max_seq_length, regression)
    dataset = tf.data.TFRecordDataset(path).batch(1024).map(lambda batch: parser(batch, None))
    batches = [{k: v.numpy() for k, v in batch.items()} for batch in dataset]
    return {name: np.concatenate([batch[name] for batch in batches]) for name in batches[0]}


def stack_features(features: List[InputFeatures], regression: bool) -> Dict[str, np.ndarray]:
    """Features converted in memory (e.g. the test set), in the cache's layout."""
    return {"input_word_ids": np.array([f.input_ids for f in features], np.int32),
            "input_mask": np.array([f.input_mask for f in features], np.int32),
            "input_type_ids": np.array([f.segment_ids for f in features], np.int32),
            "label_ids": np.array([f.label_id for f in features],
                                  np.float32 if regression else np.int32)}


_LOGITS_FUNCTIONS = weakref.WeakKeyDictionary()


def _logits_function(model, jit_compile: bool):
    """One traced inference function per model (any batch size and length)."""
    functions = _LOGITS_FUNCTIONS.setdefault(model, {})
    if jit_compile not in functions:
        spec = tf.TensorSpec([None, None], tf.int32)

        @tf.function(input_signature=[spec, spec, spec], jit_compile=jit_compile)
        def logits_of(ids, mask, types):
            return model({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types},
                         training=False)["logits"]

        functions[jit_compile] = logits_of
    return functions[jit_compile]


def bucketed_logits(model, features: Dict[str, np.ndarray], batch_size: int,
                    jit_compile: bool = False) -> np.ndarray:
    """Logits of every example, computed on batches of similar length, in the input order."""
    lengths = features["input_mask"].sum(axis=1)
    order = np.argsort(lengths, kind="stable")
    # XLA compiles one program per shape: round lengths up to limit their number.
    multiple = 32 if jit_compile else 1
    logits_of = _logits_function(model, jit_compile)

    width = features["input_word_ids"].shape[1]
    outputs = np.zeros((len(order), model.num_labels), np.float32)
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        length = int(min(width, -(-max(int(lengths[rows].max()), 1) // multiple) * multiple))
        outputs[rows] = logits_of(*(tf.constant(features[name][rows, :length]) for name in
                                    ("input_word_ids", "input_mask", "input_type_ids"))).numpy()
    return outputs


def predictions_from_logits(logits: np.ndarray, regression: bool):
    """(probabilities, predictions): softmax and arg-max, or the raw score for regression."""
    if regression:
        return logits, logits[:, 0]
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities = shifted / shifted.sum(axis=1, keepdims=True)
    return probabilities, probabilities.argmax(axis=1)


def classification_loss(logits: np.ndarray, labels: np.ndarray, regression: bool) -> float:
    """Mean cross-entropy (or mean squared error for regression), in float64."""
    if regression:
        return float(np.mean((logits[:, 0].astype(np.float64) - labels) ** 2))
    logits = logits.astype(np.float64)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probabilities = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return float(-np.mean(log_probabilities[np.arange(len(labels)), labels]))


@dataclasses.dataclass
class ClassificationTask(Task):
    """Fine-tuning on one GLUE task.

    Args:
      config: the encoder's `AlbertConfig`.
      glue_task: the task (`albert.data.glue.TASKS`).
      max_seq_length: length of the cached features.
      train_cache, train_records: the training feature cache and its record count.
      eval_cache: the dev feature cache (None: no evaluation).
      head_dropout: the head's dropout (the original: 0.1).
      initial_weights: canonical weights to start from (None: random).
    """

    config: AlbertConfig
    glue_task: GlueTask
    max_seq_length: int
    train_cache: Optional[str] = None
    train_records: int = 0
    eval_cache: Optional[str] = None
    head_dropout: float = 0.1
    initial_weights: Optional[dict] = dataclasses.field(default=None, repr=False)
    loss_names: tuple = ("loss",)

    @property
    def best_metric(self) -> str:
        return self.glue_task.best_metric

    def build_model(self):
        return AlbertClassifier(self.config, self.glue_task.num_labels, self.head_dropout)

    def initialize(self, model) -> None:
        if self.initial_weights is None:
            return
        from albert.checkpoints import assign_model_weights

        weights = self.initial_weights
        if "output_weights" in weights:
            assign_model_weights(model, weights, "--init_checkpoint")
        else:
            assign_model_weights(model.encoder, weights, "--init_checkpoint")
        self.initial_weights = None

    def run_files(self):
        return {ALBERT_CONFIG_FILE: self.config.to_json_string()}

    def train_input(self) -> TaskInput:
        return TaskInput(RecordSource((self.train_cache,), (self.train_records,)),
                         GlueParser(self.max_seq_length, self.glue_task.is_regression),
                         lengths=record_lengths(self.max_seq_length), trim=trim_to_longest)

    def eval_input(self) -> Optional[TaskInput]:
        if self.eval_cache is None:
            return None
        return TaskInput(RecordSource((self.eval_cache,), (1,)),
                         GlueParser(self.max_seq_length, self.glue_task.is_regression))

    def loss_normalizers(self, features):
        return {"examples": tf.cast(tf.shape(features["label_ids"])[0], tf.float32)}

    def losses(self, outputs, features, normalizers):
        logits = outputs["logits"]
        labels = features["label_ids"]
        if self.glue_task.is_regression:
            per_example = tf.square(logits[:, 0] - tf.cast(labels, tf.float32))
        else:
            per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=tf.cast(labels, tf.int32), logits=logits)
        return {"loss": tf.reduce_sum(per_example) / normalizers["examples"]}

    def evaluate(self, model, config) -> Optional[dict]:
        if self.eval_cache is None:
            return None
        regression = self.glue_task.is_regression
        features = features_from_cache(self.eval_cache, self.max_seq_length, regression)
        logits = bucketed_logits(model, features, config.eval_batch_size, config.jit_compile)
        _, predictions = predictions_from_logits(logits, regression)
        labels = features["label_ids"]
        return glue_metrics(self.glue_task.name, predictions, labels,
                            classification_loss(logits, labels, regression))


def write_predictions(output_dir: str, glue_task: GlueTask, guids: List[str],
                      probabilities: np.ndarray, predictions: np.ndarray) -> List[str]:
    """Writes the original's test_results.tsv and submit_results.tsv, and the GLUE server's file.

    `test_results.tsv`: one line per test example, the class probabilities
    (STS-B: the predicted score) separated by tabs, no header.
    `submit_results.tsv` and `<Task>.tsv` (the name the GLUE server expects,
    e.g. `SST-2.tsv`, `MNLI-m.tsv`, `AX.tsv`): a header `index<TAB>prediction`,
    then `<index><TAB><label>` per example.
    """
    from albert import io

    results = "".join("\t".join(str(float(p)) for p in row) + "\n" for row in probabilities)
    if glue_task.is_regression:
        labels = [str(float(value)) for value in predictions]
    else:
        labels = [glue_task.labels[int(index)] for index in predictions]
    submission = "index\tprediction\n" + "".join(
        f"{guid}\t{label}\n" for guid, label in zip(guids, labels))
    written = []
    for name, text in (("test_results.tsv", results), ("submit_results.tsv", submission),
                       (glue_task.server_file, submission)):
        path = io.join(output_dir, name)
        io.write_text_atomically(path, text)
        written.append(path)
    return written
