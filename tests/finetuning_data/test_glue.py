"""GLUE processors, feature conversion and caches on fixtures in the real layouts."""

import pytest

from albert.finetuning_data.glue import (TASKS, InputExample, convert_example, ensure_cache, get_task,
                              read_examples)
from albert.errors import InputError
from albert.tokenization import SentencePieceTokenizer
from albert.tokenization.text import preprocess_text
from glue_fixtures import write_glue


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory):
    return write_glue(str(tmp_path_factory.mktemp("glue")))


def _lower(text):
    return preprocess_text(text, lower=True)


def test_every_task_reads_its_splits(glue_dir):
    expected = {   # (train, dev, test) example counts of the fixtures
        "cola": (3, 2, 2), "sst-2": (3, 2, 2), "mrpc": (2, 1, 1), "sts-b": (2, 2, 1),
        "qqp": (2, 1, 1), "mnli": (2, 1, 1), "mismnli": (2, 1, 1), "qnli": (1, 1, 1),
        "rte": (1, 1, 1), "wnli": (1, 1, 1)}
    for name, counts in expected.items():
        task = TASKS[name]
        assert tuple(len(read_examples(task, glue_dir, split, _lower))
                     for split in ("train", "dev", "test")) == counts, name
    assert len(read_examples(TASKS["ax"], glue_dir, "test", _lower)) == 1


def test_guids_texts_and_labels_follow_the_original(glue_dir):
    cola = read_examples(TASKS["cola"], glue_dir, "train", _lower)
    # No header in CoLA's train file: the first row is example "train-0".
    assert cola[0] == InputExample("train-0", "the sailors rode the breeze clear of the rocks.",
                                   None, "1")
    assert cola[2].text_a == 'she said "hello" to the cafe owner.'   # quotes literal, accents gone
    cola_test = read_examples(TASKS["cola"], glue_dir, "test", _lower)
    assert cola_test[0] == InputExample("0", "bill floated into the cave.", None, "0")

    sst = read_examples(TASKS["sst-2"], glue_dir, "train", _lower)
    assert [e.guid for e in sst] == ["train-1", "train-2", "train-3"]   # header is row 0
    assert sst[2].text_a == '"the film" is 90,000 miles of fun'

    mrpc = read_examples(TASKS["mrpc"], glue_dir, "train", _lower)
    assert mrpc[0] == InputExample("train-1", "amrozi accused his brother of lying .",
                                   "referring to him , amrozi accused his brother .", "1")
    assert read_examples(TASKS["mrpc"], glue_dir, "test", _lower)[0].guid == "0"

    stsb = read_examples(TASKS["sts-b"], glue_dir, "train", _lower)
    assert stsb[1].label == 3.8 and stsb[1].text_b == "a man is playing a flute."
    assert read_examples(TASKS["sts-b"], glue_dir, "test", _lower)[0].label == 0.0

    qqp = read_examples(TASKS["qqp"], glue_dir, "train", _lower)
    assert [e.guid for e in qqp] == ["133273", "360472"]   # the short row is skipped
    assert read_examples(TASKS["qqp"], glue_dir, "test", _lower)[0].text_a == \
        "why am i mentally very lonely?"

    mnli = read_examples(TASKS["mnli"], glue_dir, "dev", _lower)
    assert mnli[0].label == "neutral" and mnli[0].text_a == "the new rights are nice enough"
    mismatched = read_examples(TASKS["mismnli"], glue_dir, "dev", _lower)
    assert mismatched[0].label == "contradiction"
    assert read_examples(TASKS["mismnli"], glue_dir, "test", _lower)[0].label == "contradiction"
    assert read_examples(TASKS["qnli"], glue_dir, "test", _lower)[0].label == "entailment"
    assert get_task("MNLI") is TASKS["mnli"] and get_task("SST-2") is TASKS["sst-2"]


@pytest.mark.parametrize("problem, message", [
    ("columns", "RTE/train.tsv:2: 2 columns, rte train rows need at least 4"),
    ("label", "RTE/train.tsv:2: label 'maybe' is not one of entailment, not_entailment"),
    ("score", "STS-B/train.tsv:2: score 'high' is not a number"),
])
def test_a_bad_row_names_the_file_and_line(tmp_path, problem, message):
    glue = write_glue(str(tmp_path))
    if problem == "score":
        path = tmp_path / "STS-B" / "train.tsv"
        lines = path.read_text().splitlines()
        lines[1] = lines[1].rsplit("\t", 1)[0] + "\thigh"
    else:
        path = tmp_path / "RTE" / "train.tsv"
        lines = path.read_text().splitlines()
        lines[1] = "0\tonly two" if problem == "columns" else lines[1].rsplit("\t", 1)[0] + "\tmaybe"
    path.write_text("\n".join(lines) + "\n")
    task = TASKS["sts-b" if problem == "score" else "rte"]
    with pytest.raises(InputError, match=message):
        read_examples(task, glue, "train", _lower)
    with pytest.raises(InputError, match="Unknown --task_name 'glue'"):
        get_task("glue")


def _reference_features(example, max_seq_length, tokenizer, labels):
    """The original's feature conversion, written out independently."""
    a = tokenizer.tokenize(example.text_a)
    b = tokenizer.tokenize(example.text_b) if example.text_b else None
    if b:
        while True:
            if len(a) + len(b) <= max_seq_length - 3:
                break
            if len(a) > len(b):
                a.pop()
            else:
                b.pop()
    elif len(a) > max_seq_length - 2:
        a = a[0:max_seq_length - 2]
    tokens, segments = ["[CLS]"], [0]
    for piece in a:
        tokens.append(piece)
        segments.append(0)
    tokens.append("[SEP]")
    segments.append(0)
    if b:
        for piece in b:
            tokens.append(piece)
            segments.append(1)
        tokens.append("[SEP]")
        segments.append(1)
    ids = tokenizer.convert_tokens_to_ids(tokens)
    mask = [1] * len(ids)
    while len(ids) < max_seq_length:
        ids.append(0)
        mask.append(0)
        segments.append(0)
    label = example.label if labels is None else labels.index(example.label)
    return ids, mask, segments, label


def test_features_equal_the_original_conversion_on_tricky_text(synthetic_corpus):
    tokenizer = SentencePieceTokenizer(synthetic_corpus[1])
    texts = [("Kalo mitu ren sa vo pi dan el or quis ba ne ti gu xo fal wen ry zo ha ju cle mon " * 3,
              "Éclair café ‘quoted’ “curly” 1,234,567 and 90,000 words"),
             ("Short.", "Kalo mitu ren sa vo pi dan el or quis ba ne ti gu xo fal wen " * 4),
             ("Equal length one two", "Equal length one two"),
             ("Only a single sentence with digits 3,000,000 and accents àéîõü " * 5, None)]
    for max_seq_length in (16, 32):
        for text_a, text_b in texts:
            for task, label in ((TASKS["mrpc"], "1"), (TASKS["sts-b"], 2.5)):
                example = InputExample("x", tokenizer.preprocess(text_a),
                                       tokenizer.preprocess(text_b) if text_b else None, label)
                features = convert_example(example, task, max_seq_length, tokenizer)
                ids, mask, segments, label_id = _reference_features(example, max_seq_length,
                                                                    tokenizer, task.labels)
                assert features.input_ids == ids and features.input_mask == mask
                assert features.segment_ids == segments and features.label_id == label_id
                assert features.length == sum(mask)


def test_a_cache_is_reused_only_with_the_same_settings(tmp_path, glue_dir, synthetic_corpus):
    tokenizer = SentencePieceTokenizer(synthetic_corpus[1])
    cache = str(tmp_path / "sst-2_train.tf_record")
    assert ensure_cache(TASKS["sst-2"], glue_dir, "train", cache, 32, tokenizer) == 3
    first = (tmp_path / "sst-2_train.tf_record").read_bytes()
    stamp = (tmp_path / "sst-2_train.tf_record").stat().st_mtime_ns
    assert ensure_cache(TASKS["sst-2"], glue_dir, "train", cache, 32, tokenizer) == 3
    assert (tmp_path / "sst-2_train.tf_record").stat().st_mtime_ns == stamp   # reused
    ensure_cache(TASKS["sst-2"], glue_dir, "train", cache, 48, tokenizer)     # other length
    assert (tmp_path / "sst-2_train.tf_record").read_bytes() != first
    uncased = SentencePieceTokenizer(synthetic_corpus[1], do_lower_case=False)
    ensure_cache(TASKS["sst-2"], glue_dir, "train", cache, 48, uncased)
    import json
    settings = json.loads((tmp_path / "sst-2_train.tf_record.settings.json").read_text())
    assert settings["max_seq_length"] == 48 and settings["do_lower_case"] is False
    assert settings["records"] == 3 and len(settings["tokenizer_sha256"]) == 64


# Characters str.splitlines() cuts at besides "\n", "\r\n" and "\r"; all occur in real text.
SEPARATORS = "\u2028\u2029\u0085\x0c\x0b\x1c\x1d\x1e"


@pytest.mark.parametrize("task_name", ["qqp", "rte", "sst-2"])
def test_a_row_ends_only_at_a_line_feed(tmp_path, task_name):
    """Text fields keep the separators str.splitlines() cuts at; CRLF files read as LF files."""
    glue = write_glue(str(tmp_path))
    task = TASKS[task_name]
    path = tmp_path / task.directory / "train.tsv"
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").split("\n")[:-1]]
    expected = [e.text_a for e in read_examples(task, glue, "train")]
    text_column = task.labeled.text_a
    for row in rows[1:]:
        if len(row) > text_column:
            row[text_column] = SEPARATORS.join(row[text_column].split(" ", 2))
    path.write_bytes("".join("\t".join(row) + "\r\n" for row in rows).encode("utf-8"))
    examples = read_examples(task, glue, "train")
    assert len(examples) == len(expected)   # no row dropped (QQP) or refused (others)
    assert [e.text_a.replace(SEPARATORS, " ") for e in examples] == expected
    assert all(SEPARATORS in e.text_a for e in examples)
    assert not any(e.text_a.endswith("\r") or str(e.label).endswith("\r") for e in examples)


def test_a_bad_row_after_a_separator_is_named_by_its_line(tmp_path):
    glue = write_glue(str(tmp_path))
    path = tmp_path / "RTE" / "train.tsv"
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace(" ", "\u2028", 1)
    path.write_text("\n".join(lines + ["7\tonly two"]) + "\n")
    with pytest.raises(InputError, match=r"RTE/train.tsv:3: 2 columns"):
        read_examples(TASKS["rte"], glue, "train")


def test_a_field_longer_than_the_csv_module_allows_is_read(tmp_path):
    glue = write_glue(str(tmp_path))
    long_text = "word " * 40000   # 200,000 characters; the csv module stops at 131,072
    (tmp_path / "SST-2" / "train.tsv").write_text(f"sentence\tlabel\n{long_text}\t1\n")
    [example] = read_examples(TASKS["sst-2"], glue, "train")
    assert example.text_a == long_text and example.label == "1"


@pytest.mark.parametrize("score", ["nan", "NaN", "inf", "-inf", "1e999"])
def test_a_score_that_is_not_finite_names_the_file_and_line(tmp_path, score):
    glue = write_glue(str(tmp_path))
    path = tmp_path / "STS-B" / "dev.tsv"
    lines = path.read_text().splitlines()
    lines[2] = lines[2].rsplit("\t", 1)[0] + "\t" + score
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=f"STS-B/dev.tsv:3: score '{score}' is not a finite"):
        read_examples(TASKS["sts-b"], glue, "dev")


def test_scores_outside_0_to_5_are_read_with_a_warning(tmp_path, caplog):
    glue = write_glue(str(tmp_path))
    path = tmp_path / "STS-B" / "train.tsv"
    lines = path.read_text().splitlines()
    lines[1] = lines[1].rsplit("\t", 1)[0] + "\t7.5"
    lines[2] = lines[2].rsplit("\t", 1)[0] + "\t-0.5"
    path.write_text("\n".join(lines) + "\n")
    with caplog.at_level("WARNING", logger="albert"):
        examples = read_examples(TASKS["sts-b"], glue, "train")
    assert [e.label for e in examples] == [7.5, -0.5]
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "2 scores outside 0-5" in warning and "STS-B/train.tsv:2" in warning
    caplog.clear()
    with caplog.at_level("WARNING", logger="albert"):
        read_examples(TASKS["sts-b"], write_glue(str(tmp_path / "clean")), "train")
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
