"""A tagger fine-tuned by run_token_classifier.py as a SavedModel that takes raw strings.

`serving_default` takes `text` (a `[None]` string batch) and returns, for each text, its words
and their tags, padded to the batch's most words:

* `words` `[B, W]` string: the text split on whitespace, as Python's `str.split()` splits it;
* `start`, `end` `[B, W]` int32: each word's character span in the text (`text[start:end]`,
  counted in Unicode characters as Python counts them; -1 where padded);
* `tags` `[B, W]` string, `probabilities` `[B, W]` float32: the predicted tag and its
  probability;
* `word_count` `[B]` int32: the words of each text (the rest of its row is padding).

The `tags` function returns the tag set in `tags.txt`'s order.

Every step is the Python path's (`albert.predict` on a tagger's run): each word is tokenized on
its own by the tokenizer inside the graph (SentencePiece and the text normalisation as
TensorFlow ops); a word without a piece becomes one `<unk>`; a text longer than
`max_seq_length - 2` pieces is cut into windows that overlap by half, and each word is tagged
on its first piece in the window that gives that piece the most context (the first such window
on a tie). Load with `tf.saved_model.load` (tensorflow-text's ops must be importable: `import
tensorflow_text`), or point TensorFlow Serving at the parent directory (`<export_dir>/1/`).
"""

from typing import Sequence

import tensorflow as tf

from albert import io
from albert.savedmodel.tracking import Untracked, tf_variables

VERSION = "1"


def _window_starts(lengths, budget: int):
    """Ragged `[B, (windows)]` first pieces of each text's windows: every `budget // 2` pieces
    while a full window fits, then one ending at the last piece if that is still uncovered
    (`albert.finetuning_data.tagged_files.windows`)."""
    stride = max(1, budget // 2)
    regular = tf.maximum(lengths - budget, 0) // stride + 1
    last_regular = (regular - 1) * stride
    extra = tf.cast(last_regular + budget < lengths, tf.int64)
    starts = tf.ragged.range(regular) * stride
    ends = tf.RaggedTensor.from_row_lengths(tf.repeat(lengths - budget, extra), extra)
    return tf.concat([starts, ends], axis=1)


class TokenTaggerExport(tf.__internal__.tracking.AutoTrackable):
    """The SavedModel's root: `serving_default`, `tags`, and the weights once."""

    def __init__(self, model, tokenizer, tags: Sequence[str], max_seq_length: int):
        super().__init__()
        # Here, not at the top: it loads tensorflow_text's op library, which only exports
        # that take strings need (run_token_classifier.py imports this module for every run).
        from albert.tokenization.in_graph import InGraphSentencePieceTokenizer, whitespace_class

        self._model = Untracked(model)
        self.tokenizer = InGraphSentencePieceTokenizer(tokenizer)
        self.variables = tf_variables(model.variables)
        self._cls, self._sep, self._unk = tokenizer.cls_id, tokenizer.sep_id, tokenizer.unk_id
        self._budget = max_seq_length - 2
        self._separators = whitespace_class() + "+"
        self._tag_names = tf.constant(list(tags))
        self.tags = tf.function(lambda: self._tag_names, input_signature=[])
        self.serving_default = tf.function(
            self._serve, input_signature=[tf.TensorSpec([None], tf.string, name="text")])

    def _word_pieces(self, words):
        """Ragged `[words, (pieces)]`: each word's pieces, `<unk>` for a word without any."""
        pieces = self.tokenizer.tokenize(words)
        lengths = pieces.row_lengths()
        padded = tf.concat([pieces.to_tensor(self._unk),
                            tf.fill([tf.shape(words)[0], 1], self._unk)], axis=1)
        return tf.RaggedTensor.from_tensor(padded, lengths=tf.maximum(lengths, 1))

    def _serve(self, text):
        import tensorflow_text   # loaded by __init__ already (see there)

        words, byte_starts, byte_ends = tensorflow_text.regex_split_with_offsets(
            text, self._separators)
        word_text = words.value_rowids()            # each word's text
        pieces = self._word_pieces(words.flat_values)
        piece_counts = tf.cast(pieces.row_lengths(), tf.int64)
        # Each word's first piece: its index among all the batch's pieces and within its text.
        first_global = tf.cumsum(piece_counts, exclusive=True)
        text_lengths = tf.math.unsorted_segment_sum(piece_counts, word_text, tf.shape(text)[0])
        text_first = tf.cumsum(text_lengths, exclusive=True)
        first_local = first_global - tf.gather(text_first, word_text)

        starts = _window_starts(text_lengths, self._budget)        # [B, (windows)]
        ends = tf.minimum(starts + self._budget, text_lengths[:, None])
        # Every window's pieces, between [CLS] and [SEP].
        window_text = starts.value_rowids()
        offset = tf.gather(text_first, window_text)
        positions = tf.ragged.range(starts.flat_values + offset, ends.flat_values + offset)
        ids = tf.gather(pieces.flat_values, positions)
        count = tf.shape(ids.row_lengths())[0]
        ids = tf.concat([tf.fill([count, 1], self._cls), ids, tf.fill([count, 1], self._sep)],
                        axis=1)
        inputs = {"input_word_ids": ids.to_tensor(0),
                  "input_mask": tf.ones_like(ids).to_tensor(0),
                  "input_type_ids": tf.zeros_like(ids).to_tensor(0)}
        logits = self._model.model(inputs, training=False)["logits"]

        # The window of each word's first piece with the most context: the larger integer of
        # 100 · min(pieces to its left, to its right) + the window's length, the first on a tie.
        word_starts = tf.gather(starts, word_text)               # [words, (its text's windows)]
        word_ends = tf.gather(ends, word_text)
        position = first_local[:, None]
        inside = (word_starts <= position) & (position < word_ends)
        context = 100 * tf.minimum(position - word_starts, word_ends - 1 - position) + \
            (word_ends - word_starts)
        windows = tf.cast(tf.reduce_max(word_starts.row_lengths()), tf.int64)
        order = tf.ragged.range(word_starts.row_lengths())
        score = context * (windows + 1) - order
        score = word_starts.with_flat_values(
            tf.where(inside.flat_values, score.flat_values, tf.int64.min))
        best = tf.argmax(score.to_tensor(tf.int64.min), axis=1)
        first_window = tf.gather(starts.row_starts(), word_text)
        window = first_window + best
        column = first_local - tf.gather(starts.flat_values, window) + 1   # after [CLS]
        word_logits = tf.gather_nd(logits, tf.stack([window, column], axis=1))
        probabilities = tf.nn.softmax(word_logits, axis=-1)
        chosen = tf.argmax(probabilities, axis=-1)

        def padded(values, default):
            return words.with_flat_values(values).to_tensor(default)

        byte_start = tf.cast(byte_starts.flat_values, tf.int32)
        before = tf.strings.substr(tf.gather(text, word_text), tf.zeros_like(byte_start),
                                   byte_start)
        inside_word = tf.strings.length(words.flat_values, unit="UTF8_CHAR")
        char_start = tf.strings.length(before, unit="UTF8_CHAR")
        return {"words": words.to_tensor(""),
                "start": padded(char_start, -1),
                "end": padded(char_start + inside_word, -1),
                "tags": padded(tf.gather(self._tag_names, chosen), ""),
                "probabilities": padded(tf.reduce_max(probabilities, axis=-1), 0.0),
                "word_count": tf.cast(words.row_lengths(), tf.int32)}


def export_token_tagger(model, tokenizer, tags: Sequence[str], export_dir: str,
                        max_seq_length: int, overwrite: bool = False) -> str:
    """Writes `<export_dir>/1/` (atomically) for `model`, an `AlbertTokenClassifier` fine-tuned
    on `tags`; returns the version directory."""
    if not hasattr(tokenizer, "model_proto"):
        raise ValueError("A SavedModel that takes strings needs a SentencePiece model "
                         "(--spm_model_file); a WordPiece vocabulary has no in-graph tokenizer here")
    root = TokenTaggerExport(model, tokenizer, tags, max_seq_length)
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)
    with io.new_directory(export_dir, overwrite) as scratch:
        tf.saved_model.save(root, io.join(scratch, VERSION),
                            signatures={"serving_default": root.serving_default}, options=options)
    return io.join(export_dir, VERSION)
