"""SQuAD v1.1 / v2.0: reading, the original's piece-to-character alignment, windows, features.

Reading: the official JSON (`data[].paragraphs[].context/qas[]`). A training
question needs exactly one answer unless it is `is_impossible`; its
`answer_start` is a character offset into the raw context. An answer whose
text is not at its `answer_start` is reported, skipped and counted (the
original trained on whatever span the offsets gave). Evaluation questions
carry no answers: the scorer reads the gold answers from the JSON.

Alignment (per context, as the original): the context is preprocessed and cut
into SentencePiece pieces; the pieces, concatenated with every `▁` turned into
a space, form `tok_cat_text`. A banded longest-common-subsequence between the
raw context and `tok_cat_text` (a raw character matches when its own
preprocessed form is that one character) maps characters both ways; a context
whose match covers less than 80% of it is dropped ("MISMATCH"), as the
original does. Unmatched positions are filled from their neighbours
(`_convert_index`, below). Each piece then knows the raw-context offsets of
its first and last characters, which turn predicted piece spans back into
text of the original context.

Windows: `[CLS] question [SEP] window [SEP]`, the question cut to its first
`max_query_length` ids, windows of `max_seq_length − len(question) − 3` pieces
advancing by `doc_stride`. `p_mask` is 1 where an answer cannot be (question,
`[SEP]`, padding) and 0 at `[CLS]` and the window. A training answer outside
a window labels that window as impossible with both positions at `[CLS]` (0),
for v1.1 and v2.0 alike; windows are kept, not dropped.

Files: training features go to a TFRecord with the original's features
(`unique_ids`, `input_ids`, `input_mask`, `segment_ids`, `p_mask`,
`start_positions`, `end_positions`, `is_impossible`). Prediction features go
to a TFRecord without the labels, and the decoding side of each window (its
pieces, their context offsets, the max-context positions) to a JSON file
beside it (`--predict_feature_left_file`; the original pickled it). Both
carry the settings that made them and are checked on reuse.
"""

import dataclasses
import json
import logging
import random
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from albert import io
from albert.errors import InputError
from albert.finetuning_data.feature_cache import FeatureCache, files_fingerprint, tokenizer_settings
from albert.records.example_proto import encode_example
from albert.records.tfrecord import TFRecordWriter
from albert.tokenization.text import preprocess_text

logger = logging.getLogger("albert")

FIRST_UNIQUE_ID = 1000000000
TRAIN_SHUFFLE_SEED = 12345
SPIECE_UNDERLINE = "\u2581"
LEFT_FILE_FORMAT = "albert-squad-predict-features/1"


# ------------------------------------------------------------------ reading
@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question on one context (answers only for training)."""

    qas_id: str
    question_text: str
    paragraph_text: str
    orig_answer_text: Optional[str] = None
    start_position: Optional[int] = None
    is_impossible: bool = False


@dataclasses.dataclass
class SquadData:
    """The examples of a SQuAD file, and the training questions set aside."""

    examples: List[SquadExample]
    skipped_answer_mismatch: List[str] = dataclasses.field(default_factory=list)


def load_squad_json(path: str) -> dict:
    """The parsed file, or one `InputError` naming what is wrong with it."""
    try:
        text = io.read_text(path)
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"Cannot read SQuAD file {path}: {error}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: not valid JSON ({error.msg}, line {error.lineno} column "
                         f"{error.colno})") from None
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise InputError(f"{path}: expected a SQuAD JSON object with a 'data' list")
    return document


def _field(where: str, item: dict, key: str, kind):
    value = item.get(key) if isinstance(item, dict) else None
    if not isinstance(value, kind):
        raise InputError(f"{where}: missing or invalid '{key}'")
    return value


def read_squad_examples(path: str, is_training: bool) -> SquadData:
    """The questions of a SQuAD v1.1 / v2.0 file in reading order."""
    document = load_squad_json(path)
    data = SquadData([])
    for article_index, article in enumerate(document["data"]):
        paragraphs = _field(f"{path}: data[{article_index}]", article, "paragraphs", list)
        for paragraph_index, paragraph in enumerate(paragraphs):
            where = f"{path}: data[{article_index}].paragraphs[{paragraph_index}]"
            context = _field(where, paragraph, "context", str)
            for qa_index, qa in enumerate(_field(where, paragraph, "qas", list)):
                qa_where = f"{where}.qas[{qa_index}]"
                qas_id = str(_field(qa_where, qa, "id", (str, int)))
                question = _field(qa_where, qa, "question", str)
                if not is_training:
                    data.examples.append(SquadExample(qas_id, question, context))
                    continue
                impossible = bool(qa.get("is_impossible", False))
                if impossible:
                    data.examples.append(SquadExample(qas_id, question, context, "", -1, True))
                    continue
                answers = _field(qa_where, qa, "answers", list)
                if len(answers) != 1:
                    raise InputError(f"{qa_where} (id {qas_id}): a training question needs "
                                     f"exactly 1 answer, it has {len(answers)}")
                text = _field(f"{qa_where}.answers[0]", answers[0], "text", str)
                start = _field(f"{qa_where}.answers[0]", answers[0], "answer_start", int)
                if not text or context[start:start + len(text)] != text or start < 0:
                    logger.warning("Skipping question %s: its answer %r is not at answer_start "
                                   "%d of its context", qas_id, text, start)
                    data.skipped_answer_mismatch.append(qas_id)
                    continue
                data.examples.append(SquadExample(qas_id, question, context, text, start, False))
    if data.skipped_answer_mismatch:
        logger.warning("%s: skipped %d questions whose answer text is not at its answer_start",
                       path, len(data.skipped_answer_mismatch))
    return data


# ---------------------------------------------------------------- alignment
def _convert_index(index: Sequence[Optional[int]], pos: int, m: Optional[int] = None,
                   is_start: bool = True) -> int:
    """`index[pos]`, or for an unmatched position a value from its nearest matched neighbours.

    `front` / `rear` are the nearest defined entries to the left / right
    (scanning to the ends). Only `rear`: a start becomes 0 (if `index[rear]`
    ≥ 1), an end `index[rear] − 1`. Only `front`: with `m` given and
    `index[front] < m − 1`, a start becomes `index[front] + 1` and an end
    `m − 1`. Both: the gap between them when there is one (start
    `index[front] + 1`, end `index[rear] − 1`), otherwise start `index[rear]`,
    end `index[front]`. Exactly the original's rules.
    """
    if index[pos] is not None:
        return index[pos]
    n = len(index)
    rear = pos
    while rear < n - 1 and index[rear] is None:
        rear += 1
    front = pos
    while front > 0 and index[front] is None:
        front -= 1
    if index[front] is None:
        if index[rear] >= 1:
            return 0 if is_start else index[rear] - 1
        return index[rear]
    if index[rear] is None:
        if m is not None and index[front] < m - 1:
            return index[front] + 1 if is_start else m - 1
        return index[front]
    if index[rear] > index[front] + 1:
        return index[front] + 1 if is_start else index[rear] - 1
    return index[rear] if is_start else index[front]


_UP, _LEFT, _MATCH, _UNSET = 0, 1, 2, -1


def _banded_lcs(raw_codes: np.ndarray, piece_codes: np.ndarray, band: int):
    """The original's banded LCS table `f` and move codes `g`, one row at a time.

    Row `i` visits columns `[i − band, i + band)`; cells never visited read 0.
    `f[i, j]` is the best of up (`f[i−1, j]`), left (`f[i, j−1]`, only if
    strictly larger) and diagonal (`f[i−1, j−1] + 1` on a match, only if
    strictly larger): with every value ≥ 0 the row is the running maximum of
    max(up, diagonal), and the codes follow the original's tie-breaking.
    """
    n, m = len(raw_codes), len(piece_codes)
    f = np.zeros((n, m), np.int32)
    g = np.full((n, m), _UNSET, np.int8)
    for i in range(n):
        lo, hi = max(0, i - band), min(m, i + band)
        if lo >= hi:
            continue
        up = f[i - 1, lo:hi] if i > 0 else np.zeros(hi - lo, np.int32)
        if i > 0:
            diagonal = np.empty(hi - lo, np.int32)
            diagonal[1:] = f[i - 1, lo:hi - 1]
            diagonal[0] = f[i - 1, lo - 1] if lo > 0 else 0
        else:
            diagonal = np.zeros(hi - lo, np.int32)
        match = piece_codes[lo:hi] == raw_codes[i]
        best = np.where(match, np.maximum(up, diagonal + 1), up)
        row = np.maximum.accumulate(best)
        left = np.empty_like(row)
        left[0] = 0
        left[1:] = row[:-1]
        codes = np.full(hi - lo, _UP if i > 0 else _UNSET, np.int8)
        codes[left > up] = _LEFT
        codes[match & (diagonal + 1 > np.maximum(up, left))] = _MATCH
        f[i, lo:hi] = row
        g[i, lo:hi] = codes
    return f, g


@dataclasses.dataclass
class ContextAlignment:
    """A context's pieces and their raw-context character offsets."""

    pieces: List[str]
    piece_ids: List[int]
    tok_start_to_orig_index: List[int]
    tok_end_to_orig_index: List[int]
    orig_to_chartok_index: List[Optional[int]]
    chartok_to_tok_index: List[int]

    def answer_pieces(self, start_char: int, answer_text: str) -> Tuple[int, int]:
        """(first, last) piece of the answer at raw offset `start_char`."""
        end_char = start_char + len(answer_text) - 1
        first = self.chartok_to_tok_index[
            _convert_index(self.orig_to_chartok_index, start_char, is_start=True)]
        last = self.chartok_to_tok_index[
            _convert_index(self.orig_to_chartok_index, end_char, is_start=False)]
        return first, last


def _character_codes(text: str, lower: bool) -> np.ndarray:
    """Per raw character: the code point of its preprocessed form if that is one
    character, else −1 (it can then match nothing, as in the original)."""
    codes = np.full(len(text), -1, np.int64)
    cache: Dict[str, int] = {}
    for position, character in enumerate(text):
        code = cache.get(character)
        if code is None:
            processed = preprocess_text(character, remove_space=False, lower=lower)
            code = ord(processed) if len(processed) == 1 else -1
            cache[character] = code
        codes[position] = code
    return codes


def align_context(context: str, tokenizer) -> Optional[ContextAlignment]:
    """The context's pieces with their offsets, or None when the alignment fails."""
    pieces = tokenizer.encode_pieces(tokenizer.preprocess(context))
    chartok_to_tok_index: List[int] = []
    tok_start_to_chartok_index, tok_end_to_chartok_index = [], []
    characters = 0
    for index, piece in enumerate(pieces):
        text = piece.replace(SPIECE_UNDERLINE, " ")
        chartok_to_tok_index.extend([index] * len(text))
        tok_start_to_chartok_index.append(characters)
        characters += len(text)
        tok_end_to_chartok_index.append(characters - 1)
    tok_cat_text = "".join(pieces).replace(SPIECE_UNDERLINE, " ")
    n, m = len(context), len(tok_cat_text)
    if n == 0 or m == 0:
        return None
    raw_codes = _character_codes(context, tokenizer.do_lower_case)
    piece_codes = np.array([ord(c) for c in tok_cat_text], np.int64)

    band = abs(n - m) + 5
    for _ in range(2):
        f, g = _banded_lcs(raw_codes, piece_codes, band)
        if f[n - 1, m - 1] > 0.8 * n:
            break
        band *= 2

    orig_to_chartok: List[Optional[int]] = [None] * n
    chartok_to_orig: List[Optional[int]] = [None] * m
    i, j = n - 1, m - 1
    while i >= 0 and j >= 0:
        code = g[i, j]
        if code == _UNSET:
            break
        if code == _MATCH:
            orig_to_chartok[i] = j
            chartok_to_orig[j] = i
            i, j = i - 1, j - 1
        elif code == _LEFT:
            j -= 1
        else:
            i -= 1
    if all(v is None for v in orig_to_chartok) or f[n - 1, m - 1] < 0.8 * n:
        return None
    return ContextAlignment(
        pieces=pieces,
        piece_ids=tokenizer.convert_tokens_to_ids(pieces),
        tok_start_to_orig_index=[_convert_index(chartok_to_orig, position, n, is_start=True)
                                 for position in tok_start_to_chartok_index],
        tok_end_to_orig_index=[_convert_index(chartok_to_orig, position, n, is_start=False)
                               for position in tok_end_to_chartok_index],
        orig_to_chartok_index=orig_to_chartok,
        chartok_to_tok_index=chartok_to_tok_index)


# ------------------------------------------------------------------ windows
@dataclasses.dataclass
class SquadFeature:
    """One window of one question: model inputs, labels, and what decoding needs."""

    unique_id: int
    example_index: int
    doc_span_index: int
    input_ids: List[int]
    input_mask: List[int]
    segment_ids: List[int]
    p_mask: List[int]
    #: position of the first window piece (after the first [SEP])
    doc_offset: int
    #: raw-context offsets of the first / last character of each window piece
    tok_start_to_orig_index: List[int]
    tok_end_to_orig_index: List[int]
    #: absolute positions whose piece has its maximum context in this window
    max_context_positions: List[int]
    tokens: List[str]
    start_position: Optional[int] = None
    end_position: Optional[int] = None
    is_impossible: bool = False


def doc_spans(num_pieces: int, max_tokens_for_doc: int, doc_stride: int) -> List[Tuple[int, int]]:
    """(start, length) of each window over a context of `num_pieces` pieces."""
    spans, start = [], 0
    while start < num_pieces:
        length = min(num_pieces - start, max_tokens_for_doc)
        spans.append((start, length))
        if start + length == num_pieces:
            break
        start += min(length, doc_stride)
    return spans


def max_context_windows(spans: Sequence[Tuple[int, int]], num_pieces: int) -> np.ndarray:
    """For each piece, the window in which it has the most context on both sides.

    Score `min(left, right) + 0.01 · window length`; the first maximum wins.
    """
    positions = np.arange(num_pieces)
    best = np.full(num_pieces, -1)
    best_score = np.full(num_pieces, -np.inf)
    for index, (start, length) in enumerate(spans):
        end = start + length - 1
        inside = (positions >= start) & (positions <= end)
        score = np.minimum(positions - start, end - positions) + 0.01 * length
        better = inside & (score > best_score)
        best[better], best_score[better] = index, score[better]
    return best


def check_lengths(max_seq_length: int, max_query_length: int, doc_stride: int) -> None:
    if max_seq_length <= max_query_length + 3:
        raise InputError(f"--max_seq_length={max_seq_length} leaves no room for the context: it "
                         f"must exceed max_query_length + 3 = {max_query_length + 3}")
    if doc_stride < 1:
        raise InputError(f"--doc_stride must be at least 1, got {doc_stride}")


class FeatureConverter:
    """Turns examples into windows, numbering them from `FIRST_UNIQUE_ID` as the original.

    Contexts are aligned once and reused by every question on them.
    """

    def __init__(self, tokenizer, max_seq_length: int, doc_stride: int, max_query_length: int,
                 is_training: bool):
        if getattr(tokenizer, "sp_model", None) is None:
            raise InputError("SQuAD needs a SentencePiece model (--spm_model_file): its "
                             "character alignment works on SentencePiece pieces")
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length
        self.is_training = is_training
        self.next_unique_id = FIRST_UNIQUE_ID
        self.mismatched: List[str] = []
        self.positive = self.negative = 0
        self._alignments: Dict[str, Optional[ContextAlignment]] = {}

    def _alignment(self, context: str) -> Optional[ContextAlignment]:
        if context not in self._alignments:
            if len(self._alignments) > 64:  # contexts come grouped: keep a few
                self._alignments.clear()
            self._alignments[context] = align_context(context, self.tokenizer)
        return self._alignments[context]

    def convert(self, example_index: int, example: SquadExample) -> List[SquadFeature]:
        tokenizer = self.tokenizer
        alignment = self._alignment(example.paragraph_text)
        if alignment is None:
            logger.info("MISMATCH DETECTED! Question %s skipped: its context does not align "
                        "with its pieces", example.qas_id)
            self.mismatched.append(example.qas_id)
            return []
        query_ids = tokenizer.encode(example.question_text)[:self.max_query_length]
        answer = None
        if self.is_training and not example.is_impossible:
            answer = alignment.answer_pieces(example.start_position, example.orig_answer_text)
            if answer[0] > answer[1]:  # the original stopped on an assertion here
                logger.warning("Question %s skipped: its answer maps to no piece span",
                               example.qas_id)
                self.mismatched.append(example.qas_id)
                return []
        spans = doc_spans(len(alignment.piece_ids), self.max_seq_length - len(query_ids) - 3,
                          self.doc_stride)
        best_window = max_context_windows(spans, len(alignment.piece_ids))
        features = []
        for span_index, (start, length) in enumerate(spans):
            ids = [tokenizer.cls_id, *query_ids, tokenizer.sep_id,
                   *alignment.piece_ids[start:start + length], tokenizer.sep_id]
            real = len(ids)
            padding = self.max_seq_length - real
            segment_ids = [0] * (len(query_ids) + 2) + [1] * (length + 1) + [0] * padding
            p_mask = [0] + [1] * (len(query_ids) + 1) + [0] * length + [1] * (1 + padding)
            # The original finds the window after the first [SEP] piece.
            doc_offset = ids.index(tokenizer.sep_id) + 1
            window_offset = len(query_ids) + 2
            max_context = [window_offset + i for i in range(length)
                           if best_window[start + i] == span_index]
            start_position = end_position = None
            impossible = example.is_impossible
            if self.is_training:
                start_position = end_position = 0
                if answer is not None:
                    if start <= answer[0] and answer[1] <= start + length - 1:
                        start_position = answer[0] - start + window_offset
                        end_position = answer[1] - start + window_offset
                    else:
                        impossible = True
            features.append(SquadFeature(
                unique_id=self.next_unique_id, example_index=example_index,
                doc_span_index=span_index, input_ids=ids + [0] * padding,
                input_mask=[1] * real + [0] * padding, segment_ids=segment_ids, p_mask=p_mask,
                doc_offset=doc_offset,
                tok_start_to_orig_index=alignment.tok_start_to_orig_index[start:start + length],
                tok_end_to_orig_index=alignment.tok_end_to_orig_index[start:start + length],
                max_context_positions=max_context,
                tokens=tokenizer.convert_ids_to_tokens(ids),
                start_position=start_position, end_position=end_position,
                is_impossible=impossible))
            self.next_unique_id += 1
            if impossible:
                self.negative += 1
            else:
                self.positive += 1
        return features

    def features(self, examples: Sequence[SquadExample]) -> Iterator[SquadFeature]:
        for index, example in enumerate(examples):
            if index % 1000 == 0 and index:
                logger.info("Converting %d/%d questions: %d windows with an answer, %d without",
                            index, len(examples), self.positive, self.negative)
            yield from self.convert(index, example)


def serialize_feature(feature: SquadFeature, is_training: bool) -> bytes:
    """The original's record (training adds the labels)."""
    values = {"unique_ids": ("int64", [feature.unique_id]),
              "input_ids": ("int64", feature.input_ids),
              "input_mask": ("int64", feature.input_mask),
              "segment_ids": ("int64", feature.segment_ids),
              "p_mask": ("int64", feature.p_mask)}
    if is_training:
        values["start_positions"] = ("int64", [feature.start_position])
        values["end_positions"] = ("int64", [feature.end_position])
        values["is_impossible"] = ("int64", [int(feature.is_impossible)])
    return encode_example(values)


# ------------------------------------------------------------------- caches
def feature_settings(split: str, source: str, tokenizer, max_seq_length: int, doc_stride: int,
                     max_query_length: int) -> dict:
    return {"task": "squad", "split": split, "max_seq_length": max_seq_length,
            "doc_stride": doc_stride, "max_query_length": max_query_length,
            **tokenizer_settings(tokenizer), "source_sha256": files_fingerprint([source])}


def plan_train_features(train_file: str, feature_file: str, tokenizer, max_seq_length: int,
                        doc_stride: int, max_query_length: int) -> FeatureCache:
    """The training feature file: reused when made with these settings, else to be written.

    Its counts hold the number of questions (the original computes the
    number of training steps from questions, not windows).
    """
    settings = dict(feature_settings("train", train_file, tokenizer, max_seq_length, doc_stride,
                                     max_query_length), shuffle_seed=TRAIN_SHUFFLE_SEED)

    skipped: List[str] = []

    def read():
        data = read_squad_examples(train_file, is_training=True)
        if not data.examples:
            raise InputError(f"{train_file} holds no usable training questions")
        skipped.extend(data.skipped_answer_mismatch)
        examples = list(data.examples)
        random.Random(TRAIN_SHUFFLE_SEED).shuffle(examples)
        return examples

    def count(examples):
        return {"questions": len(examples), "skipped_answer_mismatch": len(skipped)}

    return FeatureCache.plan(feature_file, settings, read, count, keep_existing=True)


def write_train_features(cache: FeatureCache, tokenizer, max_seq_length: int, doc_stride: int,
                         max_query_length: int) -> int:
    converter = FeatureConverter(tokenizer, max_seq_length, doc_stride, max_query_length, True)
    written = cache.write_records(serialize_feature(feature, True)
                                  for feature in converter.features(cache.examples or []))
    if converter.mismatched:
        logger.warning("Skipped %d training questions whose context did not align (MISMATCH)",
                       len(converter.mismatched))
    logger.info("Training windows: %d with the answer, %d without", converter.positive,
                converter.negative)
    return written


@dataclasses.dataclass
class PredictFeatures:
    """The prediction windows: model inputs as arrays, decoding side as lists."""

    examples: List[SquadExample]
    features: List[SquadFeature]

    def model_inputs(self) -> Dict[str, np.ndarray]:
        def stack(name):
            return np.array([getattr(f, name) for f in self.features], np.int32).reshape(
                len(self.features), -1)

        return {"input_word_ids": stack("input_ids"), "input_mask": stack("input_mask"),
                "input_type_ids": stack("segment_ids"), "p_mask": stack("p_mask"),
                "unique_ids": np.array([f.unique_id for f in self.features], np.int64)}


_LEFT_KEYS = ("unique_id", "example_index", "doc_span_index", "doc_offset",
              "tok_start_to_orig_index", "tok_end_to_orig_index", "max_context_positions",
              "tokens")


def _read_predict_features(feature_file: str, left_file: str) -> List[SquadFeature]:
    """Features from the TFRecord (model inputs) and the JSON left file (decoding side)."""
    left = io.read_json(left_file)
    spec = {name: tf.io.VarLenFeature(tf.int64) for name in
            ("unique_ids", "input_ids", "input_mask", "segment_ids", "p_mask")}
    features = []
    records = tf.data.TFRecordDataset(feature_file).batch(1024).map(
        lambda batch: {k: tf.sparse.to_dense(v) for k, v in tf.io.parse_example(batch,
                                                                                  spec).items()})
    rows = iter(left["features"])
    for batch in records:
        batch = {k: v.numpy() for k, v in batch.items()}
        for index in range(len(batch["unique_ids"])):
            side = next(rows)
            if side["unique_id"] != int(batch["unique_ids"][index][0]):
                raise InputError(f"{feature_file} and {left_file} do not belong together "
                                 "(their unique ids differ); delete both to rebuild them")
            features.append(SquadFeature(
                **{key: side[key] for key in _LEFT_KEYS},
                input_ids=batch["input_ids"][index].tolist(),
                input_mask=batch["input_mask"][index].tolist(),
                segment_ids=batch["segment_ids"][index].tolist(),
                p_mask=batch["p_mask"][index].tolist()))
    if len(features) != len(left["features"]):
        raise InputError(f"{feature_file} holds {len(features)} windows, {left_file} "
                         f"{len(left['features'])}; delete both to rebuild them")
    return features


def prepare_predict_features(predict_file: str, feature_file: str, left_file: str, tokenizer,
                             max_seq_length: int, doc_stride: int,
                             max_query_length: int) -> PredictFeatures:
    """The prediction windows of `predict_file`, read from the two feature files when they
    were made with these settings, else made and written to them.

    Existing files made with other settings (or by the original, which
    pickled the left file) are refused, never overwritten.
    """
    predict, write = plan_predict_features(predict_file, feature_file, left_file, tokenizer,
                                           max_seq_length, doc_stride, max_query_length)
    write()
    return predict


def plan_predict_features(predict_file: str, feature_file: str, left_file: str, tokenizer,
                          max_seq_length: int, doc_stride: int,
                          max_query_length: int) -> Tuple[PredictFeatures, Callable[[], None]]:
    """(windows, write): `prepare_predict_features` with the writing left to the caller, so a
    script can finish every check before its first write. `write()` writes the two feature
    files when they were made here (a no-op when they were read)."""
    settings = feature_settings("predict", predict_file, tokenizer, max_seq_length, doc_stride,
                                max_query_length)
    examples = read_squad_examples(predict_file, is_training=False).examples
    if not examples:
        raise InputError(f"{predict_file} holds no questions")
    have_features, have_left = io.exists(feature_file), io.exists(left_file)
    if have_features and have_left:
        stored = _read_left_header(left_file)
        stored_settings = stored.get("settings")
        if stored_settings != settings:
            differing = sorted(key for key in set(settings) | set(stored_settings or {})
                               if (stored_settings or {}).get(key) != settings.get(key))
            raise InputError(f"{left_file} was made with other settings ({', '.join(differing)} "
                             "differ); delete it and its feature file, or name other files")
        logger.info("Reading prediction features from %s and %s", feature_file, left_file)
        return (PredictFeatures(examples, _read_predict_features(feature_file, left_file)),
                lambda: None)
    if have_features or have_left:
        present, missing = (feature_file, left_file) if have_features else (left_file,
                                                                            feature_file)
        raise InputError(f"{present} exists but {missing} does not: they are made together; "
                         "delete it or name other files")
    converter = FeatureConverter(tokenizer, max_seq_length, doc_stride, max_query_length, False)
    features = list(converter.features(examples))
    if not features:
        # The original would predict "empty" for every question and score 0: a tokenizer that
        # does not fit the text, more likely than a dev set worth scoring.
        raise InputError(f"None of the {len(examples)} questions of {predict_file} has a "
                         "window: no context aligns with its SentencePiece pieces (MISMATCH); "
                         "is the SentencePiece model the one the model was trained with, and "
                         "--do_lower_case right?")
    if converter.mismatched:
        logger.warning("%d questions have no windows (MISMATCH); they get the empty prediction",
                       len(converter.mismatched))
    return PredictFeatures(examples, features), lambda: write_predict_features(
        features, feature_file, left_file, settings, len(examples))


def _read_left_header(left_file: str) -> dict:
    try:
        stored = io.read_json(left_file)
    except (UnicodeDecodeError, ValueError):
        raise InputError(f"{left_file} is not this program's JSON prediction-feature file (the "
                         "original pickled it); delete it and its feature file to rebuild "
                         "them") from None
    if not isinstance(stored, dict) or stored.get("format") != LEFT_FILE_FORMAT:
        raise InputError(f"{left_file} is not a prediction-feature file of this program; "
                         "delete it and its feature file to rebuild them")
    return stored


def write_predict_features(features: Sequence[SquadFeature], feature_file: str, left_file: str,
                           settings: dict, questions: int) -> None:
    """Both files atomically: the TFRecord first, then the JSON that validates it."""
    with io.atomic_output_file(feature_file) as temporary:
        writer = TFRecordWriter(temporary)
        for feature in features:
            writer.write(serialize_feature(feature, False))
        writer.close()
    io.write_json_atomically(left_file, {
        "format": LEFT_FILE_FORMAT, "settings": settings, "questions": questions,
        "features": [{key: getattr(f, key) for key in _LEFT_KEYS} for f in features]})
    logger.info("Wrote %d prediction windows to %s and %s", len(features), feature_file,
                left_file)


__all__ = ["SquadExample", "SquadFeature", "PredictFeatures",
           "align_context", "check_lengths", "doc_spans", "load_squad_json", "max_context_windows",
           "plan_predict_features", "plan_train_features", "prepare_predict_features",
           "read_squad_examples", "write_train_features"]
