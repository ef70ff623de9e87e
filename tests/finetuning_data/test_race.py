"""RACE reading and features against a transcription of the original's rules; bad input."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert.finetuning_data.race import (check_lengths, convert_race_example, plan_race_cache, read_race,
                              selected_levels, serialize_race_features, write_race_cache)
from albert.errors import InputError
from albert.tokenization import SentencePieceTokenizer
from race_fixtures import HIGH, MIDDLE, write_articles, write_race


def _reference_features(article, question, options, answer, max_seq_length, max_qa_length,
                        tokenizer):
    """The original's RACE features, transcribed from its description (strings, then ids)."""
    context = tokenizer.tokenize(tokenizer.preprocess(article))
    question = tokenizer.preprocess(question)
    input_ids, input_mask, segment_ids = [], [], []
    for option in options:
        option = tokenizer.preprocess(option)
        if "_" in question:
            qa = question.replace("_", option)
        else:
            qa = " ".join([question, option])
        qa_tokens = tokenizer.tokenize(qa)[-max_qa_length:]
        context_tokens = list(context)
        if len(context_tokens) + len(qa_tokens) > max_seq_length - 3:
            context_tokens = context_tokens[:max_seq_length - 3 - len(qa_tokens)]
        tokens = ["[CLS]"] + context_tokens + ["[SEP]"] + qa_tokens + ["[SEP]"]
        ids = tokenizer.convert_tokens_to_ids(tokens)
        segments = [0] * (len(context_tokens) + 2) + [1] * (len(qa_tokens) + 1)
        padding = [0] * (max_seq_length - len(ids))
        input_ids += ids + padding
        input_mask += [1] * len(ids) + padding
        segment_ids += segments + padding
    return input_ids, input_mask, segment_ids, ord(answer) - ord("A")


@pytest.mark.parametrize("layout", ["all", "articles"])
@pytest.mark.parametrize("lengths", [(32, 8), (64, 20), (128, 16)])
def test_features_equal_the_transcription_in_both_layouts(tmp_path, synthetic_corpus, layout,
                                                          lengths):
    max_seq_length, max_qa_length = lengths
    tokenizer = SentencePieceTokenizer(synthetic_corpus[1])
    root = write_race(str(tmp_path), layout)
    examples = read_race(root, "dev", preprocess=tokenizer.preprocess)
    expected = [(level, article, index) for level, articles in (("middle", MIDDLE), ("high", HIGH))
                for article in articles for index in range(len(article["answers"]))]
    assert [(e.level, e.article_id, e.question_index) for e in examples] == [
        (level, article["id"], index) for level, article, index in expected]
    truncated_context = truncated_qa = False
    for example, (level, article, index) in zip(examples, expected):
        features = convert_race_example(example, max_seq_length, max_qa_length, tokenizer)
        ids, mask, segments, label = _reference_features(
            article["article"], article["questions"][index], article["options"][index],
            article["answers"][index], max_seq_length, max_qa_length, tokenizer)
        assert sum(features.input_ids, []) == ids
        assert sum(features.input_mask, []) == mask
        assert sum(features.segment_ids, []) == segments
        assert features.label_id == label
        parsed = tf.train.Example.FromString(serialize_race_features(features)).features.feature
        assert list(parsed["input_ids"].int64_list.value) == ids
        assert list(parsed["label_ids"].int64_list.value) == [label]
        assert list(parsed["is_real_example"].int64_list.value) == [1]
        truncated_context |= all(sum(row) == max_seq_length for row in features.input_mask)
        truncated_qa |= len(tokenizer.tokenize(example.endings[0])) > max_qa_length
    if max_seq_length == 32:   # the fixtures exercise both truncations
        assert truncated_context and truncated_qa


def test_cloze_questions_take_the_option_in_every_blank(tmp_path):
    root = write_race(str(tmp_path), "all", splits=("dev",), levels=("middle",))
    examples = read_race(root, "dev", levels=("middle",), preprocess=str.lower)
    bakery, why, lunch, farmer = examples
    assert bakery.endings[1] == "tom went to the bakery to buy fresh bread."
    assert why.endings[0] == "why did tom run home? because it was cold."
    assert lunch.endings[3] == "where did zoë and her friend have lunch? in a café in zürich"
    assert farmer.endings[0] == "the farmer had _ cows and _ sheep."
    assert farmer.endings[1] == "the farmer had two _ dogs cows and two _ dogs sheep."
    assert [e.label for e in examples] == [1, 0, 3, 2]


def test_levels_and_natural_file_order(tmp_path):
    root = write_race(str(tmp_path), "articles", splits=("train",))
    ids = [e.article_id for e in read_race(root, "train")]
    assert ids == ["middle1.txt", "middle1.txt", "middle2.txt", "middle10.txt", "high1.txt",
                   "high1.txt"]
    assert {e.level for e in read_race(root, "train", selected_levels(high_only=True))} == {"high"}
    assert {e.level for e in read_race(root, "train", selected_levels(middle_only=True))} == {
        "middle"}
    with pytest.raises(InputError, match="exclude each other"):
        selected_levels(True, True)
    only_middle = write_race(str(tmp_path / "one"), "all", levels=("middle",))
    assert len(read_race(only_middle, "dev", ("middle",))) == 4
    with pytest.raises(InputError, match="No such directory: .*high"):
        read_race(only_middle, "dev")


def _bad(tmp_path, line):
    path = os.path.join(str(tmp_path), "RACE", "dev", "middle", "all.txt")
    write_articles(path, [MIDDLE[0], line])
    return str(tmp_path), path


@pytest.mark.parametrize("change, message", [
    (lambda a: a.update(answers=["E", "A"]), "answer 'E', outside A–D"),
    (lambda a: a["options"][1].pop(), "question 1 has 3 options, expected 4"),
    (lambda a: a.update(answers=["A"]), "2 questions, 2 option lists and 1 answers"),
    (lambda a: a.pop("article"), "'article' must be a string"),
])
def test_a_bad_article_is_an_error_naming_file_and_line(tmp_path, change, message):
    article = json.loads(json.dumps(MIDDLE[0]))
    change(article)
    root, path = _bad(tmp_path, article)
    with pytest.raises(InputError) as error:
        read_race(root, "dev", ("middle",))
    assert str(error.value).startswith(f"{path}:2: ") and message in str(error.value)


def test_malformed_json_names_file_and_line(tmp_path):
    root, path = _bad(tmp_path, '{"answers": ["A"], "options": [[')
    with pytest.raises(InputError, match=f"^{path}:2: not valid JSON"):
        read_race(root, "dev", ("middle",))


def test_a_question_with_five_options_fits_num_choices_five(tmp_path):
    article = dict(MIDDLE[1], options=[MIDDLE[1]["options"][0] + ["nowhere"]], answers=["E"])
    path = os.path.join(str(tmp_path), "RACE", "dev", "middle", "all.txt")
    write_articles(path, [article])
    examples = read_race(str(tmp_path), "dev", ("middle",), num_choices=5)
    assert len(examples[0].endings) == 5 and examples[0].label == 4
    with pytest.raises(InputError, match="has 5 options, expected 4"):
        read_race(str(tmp_path), "dev", ("middle",))


def test_qa_length_must_leave_room_for_the_article():
    check_lengths(512, 128)
    check_lengths(32, 28)
    for max_qa_length in (29, 40):
        with pytest.raises(InputError, match="max_qa_length.*below max_seq_length - 3 = 29"):
            check_lengths(32, max_qa_length)
    with pytest.raises(InputError, match="at least 1"):
        check_lengths(32, 0)


def test_the_cache_is_rebuilt_with_other_settings_and_counts_levels(tmp_path, synthetic_corpus):
    tokenizer = SentencePieceTokenizer(synthetic_corpus[1])
    root = write_race(str(tmp_path / "data"), "all")
    cache_path = str(tmp_path / "race_eval.tf_record")

    def make(max_qa_length, levels=("middle", "high")):
        cache = plan_race_cache(root, "dev", cache_path, levels, 32, max_qa_length, tokenizer)
        return cache, write_race_cache(cache, 32, max_qa_length, tokenizer)

    cache, records = make(8)
    assert records == 6 and cache.counts == {"middle": 4, "high": 2}
    stamp = os.stat(cache_path).st_mtime_ns
    reused, _ = make(8)
    assert reused.examples is None and reused.counts == {"middle": 4, "high": 2}
    assert os.stat(cache_path).st_mtime_ns == stamp
    make(9)
    settings = json.loads(open(cache_path + ".settings.json").read())
    assert settings["max_qa_length"] == 9 and settings["records"] == 6
    _, records = make(9, ("high",))
    assert records == 2
    values = [tf.train.Example.FromString(r.numpy()).features.feature["input_ids"].int64_list.value
              for r in tf.data.TFRecordDataset(cache_path)]
    assert all(len(v) == 4 * 32 for v in values)
    assert np.array(values).shape == (2, 128)


def test_an_all_txt_line_ends_only_at_a_line_feed(tmp_path):
    """JSON strings may hold U+2028, U+2029, U+0085 and form feeds; CRLF files read as LF."""
    article = json.loads(json.dumps(MIDDLE[0]))
    article["article"] = article["article"].replace(" ", "\u2028\u2029\u0085\x0c", 3)
    path = os.path.join(str(tmp_path), "RACE", "dev", "middle", "all.txt")
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as handle:
        handle.write("".join(json.dumps(a, ensure_ascii=False) + "\r\n"
                             for a in (article, MIDDLE[1])).encode("utf-8") + b"{not json\r\n")
    with pytest.raises(InputError, match=f"^{path}:3: not valid JSON"):
        read_race(str(tmp_path), "dev", ("middle",))
    write_articles(path, [article, MIDDLE[1]])
    examples = read_race(str(tmp_path), "dev", ("middle",))
    assert len(examples) == 3 and "\u2028\u2029\u0085\x0c" in examples[0].context


def test_a_file_that_is_not_utf8_is_one_error_naming_it(tmp_path):
    path = os.path.join(str(tmp_path), "RACE", "dev", "middle", "all.txt")
    write_articles(path, [MIDDLE[0]])
    with open(path, "ab") as handle:
        handle.write(b'{"article": "caf\xe9"}\n')
    with pytest.raises(InputError, match="all.txt is not UTF-8 text"):
        read_race(str(tmp_path), "dev", ("middle",))
