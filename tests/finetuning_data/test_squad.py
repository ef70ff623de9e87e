"""SQuAD reading, alignment and windows against a plain transcription of the original's rules."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert.finetuning_data import squad
from albert.errors import InputError
from albert.tokenization import SentencePieceTokenizer
from albert.tokenization.text import preprocess_text
from squad_fixtures import RIVER, squad_document, write_squad


# ------------------------------------------------------------------ reference
def _fill_gap(index, pos, m=None, is_start=True):
    """Gap filling as described: nearest defined neighbours to the left / right."""
    if index[pos] is not None:
        return index[pos]
    right = pos
    while right < len(index) - 1 and index[right] is None:
        right += 1
    left = pos
    while left > 0 and index[left] is None:
        left -= 1
    if index[left] is None:  # only the right neighbour
        if index[right] >= 1:
            return 0 if is_start else index[right] - 1
        return index[right]
    if index[right] is None:  # only the left neighbour
        if m is not None and index[left] < m - 1:
            return index[left] + 1 if is_start else m - 1
        return index[left]
    if index[right] > index[left] + 1:
        return index[left] + 1 if is_start else index[right] - 1
    return index[right] if is_start else index[left]


def _reference_alignment(context, pieces, lower):
    """Cell by cell banded LCS over a dict of move codes, then the backtrack."""
    cat = "".join(pieces).replace("\u2581", " ")
    n, m = len(context), len(cat)

    def run(band):
        f = np.zeros((n, m))
        moves = {}
        for i in range(n):
            for j in range(i - band, i + band):
                if j < 0 or j >= m:
                    continue
                if i > 0:
                    moves[i, j] = "up"
                    f[i, j] = f[i - 1, j]
                if j > 0 and f[i, j - 1] > f[i, j]:
                    moves[i, j] = "left"
                    f[i, j] = f[i, j - 1]
                previous = f[i - 1, j - 1] if i > 0 and j > 0 else 0
                same = preprocess_text(context[i], lower=lower, remove_space=False) == cat[j]
                if same and previous + 1 > f[i, j]:
                    moves[i, j] = "match"
                    f[i, j] = previous + 1
        return f, moves

    band = abs(n - m) + 5
    for _ in range(2):
        f, moves = run(band)
        if f[n - 1, m - 1] > 0.8 * n:
            break
        band *= 2
    to_cat, to_orig = [None] * n, [None] * m
    i, j = n - 1, m - 1
    while i >= 0 and j >= 0 and (i, j) in moves:
        move = moves[i, j]
        if move == "match":
            to_cat[i], to_orig[j] = j, i
            i, j = i - 1, j - 1
        elif move == "left":
            j -= 1
        else:
            i -= 1
    if all(v is None for v in to_cat) or f[n - 1, m - 1] < 0.8 * n:
        return None
    return to_cat, to_orig


def reference_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length,
                       training):
    """[(unique_id, tokens, ids, mask, segments, p_mask, start, end, impossible,
    starts_to_orig, ends_to_orig, max-context positions)] as the original makes them."""
    out, unique_id = [], 1000000000
    for example in examples:
        lower = tokenizer.do_lower_case
        query = tokenizer.encode_pieces(preprocess_text(example.question_text, lower=lower))
        query_ids = tokenizer.convert_tokens_to_ids(query)[:max_query_length]
        pieces = tokenizer.encode_pieces(preprocess_text(example.paragraph_text, lower=lower))
        char_to_piece, piece_first_char, piece_last_char, count = [], [], [], 0
        for index, piece in enumerate(pieces):
            text = piece.replace("\u2581", " ")
            char_to_piece += [index] * len(text)
            piece_first_char.append(count)
            count += len(text)
            piece_last_char.append(count - 1)
        aligned = _reference_alignment(example.paragraph_text, pieces, lower)
        if aligned is None:
            continue
        to_cat, to_orig = aligned
        n = len(example.paragraph_text)
        starts_to_orig = [_fill_gap(to_orig, c, n, True) for c in piece_first_char]
        ends_to_orig = [_fill_gap(to_orig, c, n, False) for c in piece_last_char]
        answer = None
        if training and not example.is_impossible:
            first = char_to_piece[_fill_gap(to_cat, example.start_position, is_start=True)]
            last = char_to_piece[_fill_gap(
                to_cat, example.start_position + len(example.orig_answer_text) - 1,
                is_start=False)]
            answer = (first, last)
        budget = max_seq_length - len(query_ids) - 3
        spans, start = [], 0
        while start < len(pieces):
            length = min(len(pieces) - start, budget)
            spans.append((start, length))
            if start + length == len(pieces):
                break
            start += min(length, doc_stride)
        for span_index, (start, length) in enumerate(spans):
            tokens = ["[CLS]", *tokenizer.convert_ids_to_tokens(query_ids), "[SEP]"]
            segments = [0] * len(tokens)
            p_mask = [0] + [1] * (len(tokens) - 1)
            max_context = []
            for offset in range(length):
                position = start + offset
                best, best_score = None, None
                for other, (s, l) in enumerate(spans):
                    if s <= position <= s + l - 1:
                        score = min(position - s, s + l - 1 - position) + 0.01 * l
                        if best_score is None or score > best_score:
                            best, best_score = other, score
                if best == span_index:
                    max_context.append(len(tokens))
                tokens.append(pieces[position])
                segments.append(1)
                p_mask.append(0)
            tokens.append("[SEP]")
            segments.append(1)
            p_mask.append(1)
            ids = tokenizer.convert_tokens_to_ids(tokens)
            pad = max_seq_length - len(ids)
            start_position = end_position = None
            impossible = example.is_impossible if training else False
            if training:
                start_position = end_position = 0
                if answer is not None:
                    if start <= answer[0] and answer[1] <= start + length - 1:
                        start_position = answer[0] - start + len(query_ids) + 2
                        end_position = answer[1] - start + len(query_ids) + 2
                    else:
                        impossible = True
            # The original keeps the pieces of the ids (unknown pieces become <unk>).
            out.append((unique_id, tokenizer.convert_ids_to_tokens(ids), ids + [0] * pad, [1] * len(ids) + [0] * pad,
                        segments + [0] * pad, p_mask + [1] * pad, start_position, end_position,
                        impossible, starts_to_orig[start:start + length],
                        ends_to_orig[start:start + length], max_context))
            unique_id += 1
    return out


def _ours(feature):
    return (feature.unique_id, feature.tokens, feature.input_ids, feature.input_mask,
            feature.segment_ids, feature.p_mask, feature.start_position, feature.end_position,
            feature.is_impossible, feature.tok_start_to_orig_index,
            feature.tok_end_to_orig_index, feature.max_context_positions)


@pytest.fixture(scope="module")
def tokenizers(synthetic_corpus, demo_corpus):
    return {"synthetic": SentencePieceTokenizer(synthetic_corpus[1]),
            "demo": SentencePieceTokenizer(demo_corpus[1]),
            "demo-cased": SentencePieceTokenizer(demo_corpus[1], do_lower_case=False)}


@pytest.mark.parametrize("tokenizer_name", ["synthetic", "demo", "demo-cased"])
@pytest.mark.parametrize("version", ["1.1", "2.0"])
@pytest.mark.parametrize("lengths", [(64, 24, 16), (48, 7, 8), (128, 32, 64)])
def test_features_equal_the_transcription(tmp_path, tokenizers, tokenizer_name, version,
                                          lengths):
    tokenizer = tokenizers[tokenizer_name]
    path = write_squad(str(tmp_path / "train.json"), version)
    for training in (True, False):
        examples = squad.read_squad_examples(path, is_training=training).examples
        converter = squad.FeatureConverter(tokenizer, *lengths, is_training=training)
        ours = [_ours(f) for f in converter.features(examples)]
        expected = reference_features(examples, tokenizer, *lengths, training)
        assert len(ours) == len(expected)
        for mine, theirs in zip(ours, expected):
            assert mine == theirs
    # The fixtures exercise several windows, out-of-span windows and answers on window edges.
    training_features = list(squad.FeatureConverter(tokenizer, *lengths, True).features(
        squad.read_squad_examples(path, True).examples))
    windows = [f for f in training_features if f.example_index == 0]
    assert len(windows) > 1
    assert any(f.is_impossible for f in windows) and any(not f.is_impossible for f in windows)


def test_answers_map_back_to_their_text(tokenizers, tmp_path):
    """Piece spans of training answers give back (at least) the answer text."""
    tokenizer = tokenizers["demo"]
    path = write_squad(str(tmp_path / "train.json"), "2.0")
    examples = squad.read_squad_examples(path, True).examples
    converter = squad.FeatureConverter(tokenizer, 384, 128, 64, True)
    edge_starts = 0
    for feature in converter.features(examples):
        example = examples[feature.example_index]
        if feature.is_impossible:
            assert feature.start_position == feature.end_position == 0
            continue
        start = feature.tok_start_to_orig_index[feature.start_position - feature.doc_offset]
        end = feature.tok_end_to_orig_index[feature.end_position - feature.doc_offset]
        text = example.paragraph_text[start:end + 1].strip()
        assert example.orig_answer_text.rstrip(".") in text
        edge_starts += start == 0 or end == len(example.paragraph_text) - 1
    assert edge_starts >= 2  # answers at the first and the last character of a context


def test_a_context_that_does_not_align_is_dropped_like_the_original(tokenizers):
    tokenizer = tokenizers["demo"]
    # Ligatures become two letters each and can match nothing: under 80% aligned.
    context = "ﬁﬂﬃ ﬁﬂ ﬃﬁ " * 6 + "river"
    example = squad.SquadExample("x", "What?", context)
    assert reference_features([example], tokenizer, 64, 16, 8, False) == []
    converter = squad.FeatureConverter(tokenizer, 64, 16, 8, False)
    assert converter.convert(0, example) == [] and converter.mismatched == ["x"]


def test_windows_and_max_context():
    assert squad.doc_spans(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
    assert squad.doc_spans(4, 4, 2) == [(0, 4)]
    assert squad.doc_spans(9, 4, 6) == [(0, 4), (4, 4), (8, 1)]
    best = squad.max_context_windows([(0, 4), (3, 4), (6, 4)], 10)
    # pieces 3 and 6 score 0.04 in both their windows: the first maximum wins.
    assert best.tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_records_have_the_original_features(tmp_path, tokenizers):
    tokenizer = tokenizers["synthetic"]
    train = write_squad(str(tmp_path / "train.json"), "2.0")
    cache = squad.plan_train_features(train, str(tmp_path / "train.tf_record"), tokenizer, 64,
                                      24, 16)
    assert cache.counts == {"questions": 10, "skipped_answer_mismatch": 0}
    written = squad.write_train_features(cache, tokenizer, 64, 24, 16)
    record = next(iter(tf.data.TFRecordDataset(str(tmp_path / "train.tf_record"))))
    example = tf.train.Example.FromString(record.numpy())
    features = example.features.feature
    assert sorted(features) == sorted(["unique_ids", "input_ids", "input_mask", "segment_ids",
                                       "p_mask", "start_positions", "end_positions",
                                       "is_impossible"])
    assert len(features["input_ids"].int64_list.value) == 64
    assert features["unique_ids"].int64_list.value[0] == 1000000000
    # The training questions are shuffled once with random.Random(12345), as the original.
    import random
    order = list(squad.read_squad_examples(train, True).examples)
    random.Random(12345).shuffle(order)
    assert written > 10
    reference = reference_features(order, tokenizer, 64, 24, 16, True)
    ids = [list(tf.train.Example.FromString(r.numpy()).features.feature["input_ids"]
                .int64_list.value)
           for r in tf.data.TFRecordDataset(str(tmp_path / "train.tf_record"))]
    assert ids == [row[2] for row in reference]


def test_prediction_files_are_json_reused_and_checked(tmp_path, tokenizers):
    tokenizer = tokenizers["demo"]
    dev = write_squad(str(tmp_path / "dev.json"), "1.1", for_training=False)
    record, left = str(tmp_path / "dev.tf_record"), str(tmp_path / "dev_left.json")
    made = squad.prepare_predict_features(dev, record, left, tokenizer, 64, 24, 16)
    stored = json.loads(open(left).read())  # JSON, not pickle
    assert stored["settings"]["max_seq_length"] == 64 and stored["questions"] == 7
    again = squad.prepare_predict_features(dev, record, left, tokenizer, 64, 24, 16)
    assert [_ours(f) for f in again.features] == [_ours(f) for f in made.features]
    before = open(left).read(), open(record, "rb").read()
    with pytest.raises(InputError, match="other settings.*max_seq_length"):
        squad.prepare_predict_features(dev, record, left, tokenizer, 96, 24, 16)
    with open(left, "wb") as file:  # what the original leaves: a pickle
        import pickle
        pickle.dump([1, 2], file)
    with pytest.raises(InputError, match="pickled"):
        squad.prepare_predict_features(dev, record, left, tokenizer, 64, 24, 16)
    assert open(record, "rb").read() == before[1]


def test_reading_checks_and_reports(tmp_path):
    document = squad_document("1.1")
    qa = document["data"][0]["paragraphs"][0]["qas"][0]
    qa["answers"][0]["answer_start"] += 3
    path = write_squad(str(tmp_path / "shifted.json"), document=document)
    data = squad.read_squad_examples(path, is_training=True)
    assert data.skipped_answer_mismatch == ["q-river-1"]
    assert len(data.examples) == 6
    assert len(squad.read_squad_examples(path, is_training=False).examples) == 7

    broken = tmp_path / "broken.json"
    broken.write_text('{"data": [{"paragraphs": [}]}')
    with pytest.raises(InputError, match="not valid JSON.*line 1"):
        squad.read_squad_examples(str(broken), True)
    two = squad_document("1.1")
    two["data"][1]["paragraphs"][0]["qas"][0]["answers"].append(
        dict(two["data"][1]["paragraphs"][0]["qas"][0]["answers"][0]))
    with pytest.raises(InputError, match="exactly 1 answer"):
        squad.read_squad_examples(write_squad(str(tmp_path / "two.json"), document=two), True)
    with pytest.raises(InputError, match="max_query_length"):
        squad.check_lengths(67, 64, 128)
    assert RIVER in open(path, encoding="utf-8").read()
    assert os.path.getsize(path) > 0
