"""A classifier fine-tuned on a user's files as a SavedModel that takes raw strings.

The tokenizer is inside (SentencePiece and the text normalisation as TensorFlow ops,
`albert.tokenization.in_graph`), so serving needs no Python preprocessing: load it with
`tf.saved_model.load` alone (tensorflow-text's ops must be importable: `import
tensorflow_text`), or point TensorFlow Serving at the parent directory, since the model is
written as version `1` (`<export_dir>/1/`, the layout TensorFlow Serving reads).

`serving_default` takes `text` (a `[None]` string batch), or `text_a` and `text_b` for a task
on pairs, and returns, for classification, `label` (the predicted label's name, `[B]`
string) and `probabilities` (`[B, num_labels]`, the labels in `labels.txt`'s order; the
`labels` function returns them); for regression, `score` (`[B]`); for multi-label, `label`
(the predicted labels joined by the run's separator, `""` for none, `[B]` string),
`predicted` (`[B, num_labels]` int32, 1 where a label's probability reaches the run's
threshold) and `probabilities` (each label's sigmoid). Sequences are built as
fine-tuning built them: `[CLS] A [SEP] (B [SEP])`, a single text cut to `max_seq_length - 2`
pieces, a pair cut by dropping the last piece of the longer side (B on ties) until it fits;
each batch is padded to its longest sequence only (padding changes no output).
"""

from typing import Optional

import tensorflow as tf

from albert import io
from albert.savedmodel.tracking import Untracked, tf_variables

VERSION = "1"


def _cut_pair(length_a, length_b, budget):
    """The lengths the longest-first rule leaves (pop the longer side's last piece, B on
    ties), in closed form: a longer side is cut to what the shorter leaves; when both must
    be cut they end at budget/2 each, A keeping the odd piece."""
    fits = length_a + length_b <= budget
    shorter = tf.minimum(length_a, length_b)
    one_side = 2 * shorter <= budget
    cut_a = tf.where(one_side, tf.where(length_a > length_b, budget - length_b, length_a),
                     (budget + 1) // 2)
    cut_b = tf.where(one_side, tf.where(length_b >= length_a, budget - length_a, length_b),
                     budget // 2)
    return tf.where(fits, length_a, cut_a), tf.where(fits, length_b, cut_b)


class TextClassifierExport(tf.__internal__.tracking.AutoTrackable):
    """The SavedModel's root: `serving_default`, `labels`, and the weights once."""

    def __init__(self, model, tokenizer, labels: Optional[tuple], pair: bool,
                 max_seq_length: int, multi_label_threshold: Optional[float] = None,
                 label_separator: str = ";"):
        super().__init__()
        # Here, not at the top: it loads tensorflow_text's op library, which only exports
        # that take strings need (run_classifier.py imports this module for every run).
        from albert.tokenization.in_graph import InGraphSentencePieceTokenizer

        self._model = Untracked(model)
        self.tokenizer = InGraphSentencePieceTokenizer(tokenizer)
        self.variables = tf_variables(model.variables)
        self._cls, self._sep = tokenizer.cls_id, tokenizer.sep_id
        self._max_seq_length = max_seq_length
        self._labels = labels
        self._threshold, self._separator = multi_label_threshold, label_separator
        if labels is not None:
            self._label_names = tf.constant(list(labels))
            self.labels = tf.function(lambda: self._label_names, input_signature=[])
        spec = tf.TensorSpec([None], tf.string)
        if pair:
            self.serving_default = tf.function(
                lambda text_a, text_b: self._serve(text_a, text_b),
                input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                 tf.TensorSpec([None], tf.string, name="text_b")])
        else:
            self.serving_default = tf.function(lambda text: self._serve(text, None),
                                               input_signature=[spec])

    def _pieces(self, text):
        # preprocess, then tokenize (which preprocesses again): the fine-tuning path reads
        # each field through the tokenizer's preprocessing and then tokenizes it.
        return self.tokenizer.tokenize(self.tokenizer.preprocess(text))

    def _serve(self, text_a, text_b):
        pieces_a = self._pieces(text_a)
        batch = tf.shape(text_a)[0]
        cls = tf.fill([batch, 1], self._cls)
        sep = tf.fill([batch, 1], self._sep)
        if text_b is None:
            pieces_a = pieces_a[:, :self._max_seq_length - 2]
            ids = tf.concat([cls, pieces_a, sep], axis=1)
            types = tf.zeros_like(ids)
        else:
            pieces_b = self._pieces(text_b)
            keep_a, keep_b = _cut_pair(pieces_a.row_lengths(), pieces_b.row_lengths(),
                                       tf.cast(self._max_seq_length - 3, tf.int64))
            pieces_a = tf.ragged.boolean_mask(
                pieces_a, tf.ragged.range(pieces_a.row_lengths()) < keep_a[:, None])
            pieces_b = tf.ragged.boolean_mask(
                pieces_b, tf.ragged.range(pieces_b.row_lengths()) < keep_b[:, None])
            first = tf.concat([cls, pieces_a, sep], axis=1)
            second = tf.concat([pieces_b, sep], axis=1)
            ids = tf.concat([first, second], axis=1)
            types = tf.concat([tf.zeros_like(first), tf.ones_like(second)], axis=1)
        mask = tf.ones_like(ids)
        inputs = {"input_word_ids": ids.to_tensor(0), "input_mask": mask.to_tensor(0),
                  "input_type_ids": types.to_tensor(0)}
        logits = self._model.model(inputs, training=False)["logits"]
        if self._labels is None:
            return {"score": logits[:, 0]}
        if self._threshold is not None:
            probabilities = tf.sigmoid(logits)
            chosen = probabilities >= self._threshold
            names = tf.ragged.boolean_mask(
                tf.broadcast_to(self._label_names, tf.shape(chosen)), chosen)
            return {"label": tf.strings.reduce_join(names, axis=-1, separator=self._separator),
                    "predicted": tf.cast(chosen, tf.int32), "probabilities": probabilities}
        probabilities = tf.nn.softmax(logits, axis=-1)
        return {"label": tf.gather(self._label_names, tf.argmax(probabilities, axis=-1)),
                "probabilities": probabilities}


def export_text_classifier(model, tokenizer, task, export_dir: str, max_seq_length: int,
                           overwrite: bool = False) -> str:
    """Writes `<export_dir>/1/` (atomically) for `model`, an `AlbertClassifier` fine-tuned
    on `task` (a `FileTask`); returns the version directory."""
    if not hasattr(tokenizer, "model_proto"):
        raise ValueError("A SavedModel that takes strings needs a SentencePiece model "
                         "(--spm_model_file); a WordPiece vocabulary has no in-graph tokenizer here")
    root = TextClassifierExport(model, tokenizer, task.labels,
                                len(task.columns.text_columns) == 2, max_seq_length,
                                task.multi_label_threshold, task.label_separator)
    signatures = {"serving_default": root.serving_default}
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)
    with io.new_directory(export_dir, overwrite) as scratch:
        tf.saved_model.save(root, io.join(scratch, VERSION), signatures=signatures,
                            options=options)
    return io.join(export_dir, VERSION)
