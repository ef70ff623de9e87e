"""What every fine-tuning task shares: cached token features, initial weights, inference.

GLUE classification (`albert.tasks.classification`) and multiple choice
(`albert.tasks.multiple_choice`, RACE) subclass `FineTuningTask`; they add
their model, loss and metrics.

Feature caches hold the original's TFRecord features `input_ids`,
`input_mask`, `segment_ids` (int64; `max_seq_length` per sequence, or
`num_choices × max_seq_length` for multiple choice), `label_ids` and
`is_real_example`. The parser maps them to the encoder's input names
(`input_word_ids`, `input_mask`, `input_type_ids`), shaped `[B, S]` or
`[B, num_choices, S]`.

Evaluation and prediction run on length-bucketed batches: examples are
sorted by their number of real tokens, batched, and each batch is cut to its
longest example (padding never changes the outputs at real positions: padded
keys get −10000 before the softmax), then the results are put back in file
order. Most fine-tuning texts are far shorter than `max_seq_length`, so this
is several times faster than padded batches and gives the same numbers.
"""

import dataclasses
import weakref
from typing import ClassVar, Dict, Optional

import numpy as np
import tensorflow as tf

from albert import interrupts, io
from albert.checkpoints import ALBERT_CONFIG_FILE, assign_model_weights
from albert.checkpoints.weights import find_head
from albert.config import AlbertConfig
from albert.records.streams import RecordSource
from albert.training.inputs import TaskInput
from albert.training.loop import Task

RUN_SETTINGS_FILE = "run_settings.json"

TOKEN_FEATURES = {"input_ids": "input_word_ids", "input_mask": "input_mask",
                  "segment_ids": "input_type_ids"}
MODEL_INPUTS = tuple(TOKEN_FEATURES.values())


class CachedFeatureParser:
    """`parse(records, positions) -> features` for a fine-tuning feature cache.

    Args:
      max_seq_length: tokens per sequence.
      num_choices: sequences per record (None: one, features `[B, S]`;
        otherwise `[B, num_choices, S]`).
      float_labels: `label_ids` is a float (regression).
      label_width: floats per label (multi-label: one 0/1 per label, `label_ids` `[B, width]`).
    """

    def __init__(self, max_seq_length: int, num_choices: Optional[int] = None,
                 float_labels: bool = False, label_width: Optional[int] = None):
        self.shape = [max_seq_length] if num_choices is None else [num_choices, max_seq_length]
        self.label_shape = [-1] if label_width is None else [-1, label_width]
        width = max_seq_length * (num_choices or 1)
        self.spec = {name: tf.io.FixedLenFeature([width], tf.int64) for name in TOKEN_FEATURES}
        self.spec["label_ids"] = tf.io.FixedLenFeature(
            [label_width or 1], tf.float32 if float_labels or label_width else tf.int64)
        self.spec["is_real_example"] = tf.io.FixedLenFeature([1], tf.int64)

    def __call__(self, records, positions) -> dict:
        parsed = tf.io.parse_example(records, self.spec)
        features = {model_name: tf.reshape(tf.cast(parsed[name], tf.int32), [-1, *self.shape])
                    for name, model_name in TOKEN_FEATURES.items()}
        labels = tf.reshape(parsed["label_ids"], self.label_shape)
        features["label_ids"] = tf.cast(labels, tf.int32) if labels.dtype == tf.int64 else labels
        features["is_real_example"] = tf.cast(tf.reshape(parsed["is_real_example"], [-1]),
                                              tf.int32)
        return features


def record_lengths(max_seq_length: int, num_choices: Optional[int] = None):
    """`lengths(records)`: the longest sequence's real tokens in each serialised record."""
    spec = {"input_mask": tf.io.FixedLenFeature([max_seq_length * (num_choices or 1)], tf.int64)}

    def lengths(records):
        mask = tf.io.parse_example(records, spec)["input_mask"]
        per_sequence = tf.reduce_sum(tf.reshape(mask, [tf.shape(mask)[0], -1, max_seq_length]),
                                     axis=-1)
        return tf.cast(tf.reduce_max(per_sequence, axis=-1), tf.int32)

    return lengths


# Per-position features beside the model inputs that are cut with them (SQuAD's p_mask).
POSITION_FEATURES = ("p_mask",)


def trim_to_longest(features: dict) -> dict:
    """The batch's token features cut to its longest sequence. Padding changes no encoder
    output; a head that scores padding positions unmasked (SQuAD v1.1's span logits) then
    scores fewer of them, which is why v1.1 buckets only with --bucket_by_length."""
    length = tf.reduce_max(tf.reduce_sum(features["input_mask"], axis=-1))
    trimmed = dict(features)
    for name in (*MODEL_INPUTS, *POSITION_FEATURES):
        if name in features:
            trimmed[name] = features[name][..., :length]
    return trimmed


def features_from_cache(path: str, parser: CachedFeatureParser) -> Dict[str, np.ndarray]:
    """Every record of a feature cache, as numpy arrays (file order)."""
    dataset = tf.data.TFRecordDataset(path).batch(1024).map(lambda batch: parser(batch, None))
    batches = [{k: v.numpy() for k, v in batch.items()} for batch in dataset]
    return {name: np.concatenate([batch[name] for batch in batches]) for name in batches[0]}


_OUTPUT_FUNCTIONS = weakref.WeakKeyDictionary()


def _outputs_function(model, input_names, output_names, rank: int, jit_compile: bool,
                      call_options=()):
    """One traced inference function per model, inputs, outputs, input rank and call
    options (any batch size and length)."""
    functions = _OUTPUT_FUNCTIONS.setdefault(model, {})
    key = (tuple(input_names), tuple(output_names), rank, jit_compile, tuple(call_options))
    if key not in functions:
        spec = [tf.TensorSpec([None] * rank, tf.int32) for _ in input_names]

        @tf.function(input_signature=spec, jit_compile=jit_compile)
        def outputs_of(*values):
            outputs = model(dict(zip(input_names, values)), training=False, **dict(call_options))
            return {name: outputs[name] for name in output_names}

        functions[key] = outputs_of
    return functions[key]


def bucketed_outputs(model, features: Dict[str, np.ndarray], batch_size: int,
                     jit_compile: bool = False, output_names=("logits",), extra_inputs=(),
                     min_length: int = 1, trim: bool = True,
                     position_outputs=(), call_options=()) -> Dict[str, np.ndarray]:
    """The model's named outputs for every example, computed on batches of similar length.

    `features` holds `input_word_ids`, `input_mask`, `input_type_ids` (and
    any `extra_inputs` of the same shape, e.g. SQuAD's `p_mask`) as `[N, S]`
    or `[N, num_choices, S]` arrays; the outputs come back in input order.
    Each batch is cut to its longest example, but not below `min_length`
    (e.g. a top-k over positions); with `trim=False` every batch keeps all
    `S` positions. `position_outputs` name the outputs with a position axis
    (`[N, length, ...]`): they are padded back to `S` with −inf. `call_options`:
    (name, value) pairs passed to the model's call (e.g. `logits_only`).
    """
    mask = features["input_mask"]
    lengths = mask.reshape(len(mask), -1, mask.shape[-1]).sum(axis=-1).max(axis=-1)
    order = np.argsort(lengths, kind="stable")
    # XLA compiles one program per shape: round lengths up to limit their number.
    multiple = 32 if jit_compile else 1
    input_names = (*MODEL_INPUTS, *extra_inputs)
    outputs_of = _outputs_function(model, input_names, output_names, mask.ndim, jit_compile,
                                   call_options)

    width = mask.shape[-1]
    outputs: Dict[str, np.ndarray] = {}
    for start in range(0, len(order), batch_size):
        interrupts.raise_if_requested()   # a Ctrl-C a finalizer swallowed stops here
        rows = order[start:start + batch_size]
        length = width
        if trim:
            longest = max(int(lengths[rows].max()), min_length, 1)
            length = int(min(width, -(-longest // multiple) * multiple))
        batch = outputs_of(*(tf.constant(features[name][rows][..., :length])
                             for name in input_names))
        for name, value in batch.items():
            value = value.numpy()
            if name in position_outputs and length < width:
                padded = np.full((len(rows), width, *value.shape[2:]), -np.inf, value.dtype)
                padded[:, :length] = value
                value = padded
            if name not in outputs:
                outputs[name] = np.zeros((len(order), *value.shape[1:]), value.dtype)
            outputs[name][rows] = value
    return outputs


def bucketed_logits(model, features: Dict[str, np.ndarray], batch_size: int,
                    jit_compile: bool = False) -> np.ndarray:
    """The logits of a model with a head on the pooled output (classifier, multiple choice)
    for every example, on batches of similar length, in input order; the last block computes
    token 0 alone (`logits_only`), since nothing else reaches the head."""
    return bucketed_outputs(model, features, batch_size, jit_compile,
                            call_options=(("logits_only", True),))["logits"]


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def cross_entropy(logits: np.ndarray, labels: np.ndarray) -> float:
    """Mean softmax cross-entropy, in float64."""
    logits = logits.astype(np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probabilities = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return float(-np.mean(log_probabilities[np.arange(len(labels)), labels]))


@dataclasses.dataclass(kw_only=True)
class FineTuningTask(Task):
    """A fine-tuning task on cached features; subclasses add model, loss and metrics.

    Args:
      config: the encoder's `AlbertConfig`.
      max_seq_length: tokens per sequence in the caches.
      train_cache, train_records: the training feature cache and its record count.
      eval_cache: the dev feature cache (None: no evaluation).
      head_dropout: the head's dropout (the original: 0.1).
      initial_weights: canonical weights to start from (None: random); with
        the task's head, or the encoder only.
      settings: what shapes the features and so every checkpoint and
        prediction of the run (task, lengths, tokenizer); recorded in
        `run_settings.json`, and a later run into the directory with other
        settings is refused instead of overwriting its predictions.
    """

    config: AlbertConfig
    max_seq_length: int
    train_cache: Optional[str] = None
    train_records: int = 0
    eval_cache: Optional[str] = None
    head_dropout: float = 0.1
    initial_weights: Optional[dict] = dataclasses.field(default=None, repr=False)
    settings: dict = dataclasses.field(default_factory=dict)
    loss_names: tuple = ("loss",)
    #: eval_results.txt as the original fine-tuning scripts write it
    eval_text_layout: ClassVar[str] = "finetuning"

    #: sequences per example (None: one)
    num_choices = None

    def parser(self) -> CachedFeatureParser:
        raise NotImplementedError

    def initialize(self, model) -> None:
        if self.initial_weights is None:
            return

        weights = self.initial_weights
        if find_head(weights, prefer=model.head_name)[0] == model.head_name:
            assign_model_weights(model, weights, "--init_checkpoint")
        else:
            assign_model_weights(model.encoder, weights, "--init_checkpoint")
        self.initial_weights = None

    def run_files(self):
        files = {ALBERT_CONFIG_FILE: self.config.to_json_string()}
        if self.settings:
            files[RUN_SETTINGS_FILE] = io.json_text(self.settings)
        return files

    def train_input(self) -> TaskInput:
        return TaskInput(RecordSource((self.train_cache,), (self.train_records,)), self.parser(),
                         lengths=record_lengths(self.max_seq_length, self.num_choices), trim=trim_to_longest)

    def eval_input(self) -> Optional[TaskInput]:
        if self.eval_cache is None:
            return None
        return TaskInput(RecordSource((self.eval_cache,), (1,)), self.parser())

    def eval_features(self) -> Dict[str, np.ndarray]:
        return features_from_cache(self.eval_cache, self.parser())

    def loss_normalizers(self, features):
        return {"examples": tf.cast(tf.shape(features["label_ids"])[0], tf.float32)}

    def softmax_loss(self, logits, labels, normalizers):
        """This replica's share of the mean cross-entropy of the global batch."""
        per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(labels, tf.int32), logits=logits)
        return tf.reduce_sum(per_example) / normalizers["examples"]
