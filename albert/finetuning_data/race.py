"""RACE: reading the original's layout, the original's multiple-choice features, caches.

Layout: `<data_dir>/RACE/{train,dev,test}/{middle,high}/`, each level folder
holding either `all.txt` (one JSON object per line, the form the original
reads) or the raw release's one JSON file per article (`1.txt`, `2.txt`,
..., read in natural order of their names). Each article object has `id`,
`article`, `questions` (list), `options` (a list of `num_choices` options
per question) and `answers` (letters, `A` for the first option). Levels are
read `middle` first, then `high`; `levels` restricts them (the original's
`--middle_only` / `--high_only`).

Examples: one per question, every text passed through the tokenizer's
`preprocess_text`. For each option, a question containing `_` (a cloze) has
every `_` replaced by the option; otherwise the text is `question + " " +
option`.

Features per option: the **last** `max_qa_length` pieces of that text; the
article's pieces cut from the end so that `[CLS] article [SEP] qa [SEP]` fits
`max_seq_length`; segment 0 up to the first `[SEP]`, 1 after; zero-padded.
The options' sequences are concatenated: `input_ids`, `input_mask`,
`segment_ids` hold `num_choices × max_seq_length` values each.
"""

import dataclasses
import json
import logging
import re
from typing import Dict, List, Sequence, Tuple

from albert import io
from albert.finetuning_data.feature_cache import FeatureCache, files_fingerprint, tokenizer_settings
from albert.errors import InputError
from albert.records.example_proto import encode_example

logger = logging.getLogger("albert")

LEVELS = ("middle", "high")
SPLITS = ("train", "dev", "test")
ALL_FILE = "all.txt"


def selected_levels(middle_only: bool = False, high_only: bool = False) -> Tuple[str, ...]:
    if middle_only and high_only:
        raise InputError("--middle_only and --high_only exclude each other")
    return ("middle",) if middle_only else ("high",) if high_only else LEVELS


def check_lengths(max_seq_length: int, max_qa_length: int) -> None:
    """The question+option part must leave room for [CLS], two [SEP] and some article."""
    if max_qa_length < 1:
        raise InputError(f"--max_qa_length must be at least 1, got {max_qa_length}")
    if max_qa_length >= max_seq_length - 3:
        raise InputError(f"--max_qa_length={max_qa_length} leaves no room for the article in "
                         f"--max_seq_length={max_seq_length}: it must be below "
                         f"max_seq_length - 3 = {max_seq_length - 3}")


@dataclasses.dataclass(frozen=True)
class RaceExample:
    """One question: the article and, per option, the question+option text."""

    level: str
    article_id: str
    question_index: int
    context: str
    endings: Tuple[str, ...]
    label: int


def _natural_key(name: str):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def level_files(data_dir: str, split: str, level: str) -> List[str]:
    """The files of one level of a split: its all.txt, or its per-article files."""
    directory = io.join(data_dir, "RACE", split, level)
    if not io.isdir(directory):
        raise InputError(f"No such directory: {directory} (RACE layout: "
                         "<data_dir>/RACE/{train,dev,test}/{middle,high}/)")
    if io.exists(io.join(directory, ALL_FILE)):
        return [io.join(directory, ALL_FILE)]
    names = sorted((name for name in io.listdir(directory)
                    if not name.startswith(".") and not io.isdir(io.join(directory, name))),
                   key=_natural_key)
    if not names:
        raise InputError(f"{directory} holds neither {ALL_FILE} nor per-article files")
    return [io.join(directory, name) for name in names]


def _articles(path: str):
    """(where, JSON object) of each article in `path` (all.txt: one per line)."""
    text = io.read_utf8(path)
    if io.basename(path) == ALL_FILE:
        # Lines end at line feeds only: U+2028 and the like are valid inside JSON strings.
        items = [(f"{path}:{number}", line) for number, line in
                 enumerate(io.split_lines(text), start=1) if line.strip()]
    else:
        items = [(path, text)]
    for where, item in items:
        try:
            article = json.loads(item)
        except json.JSONDecodeError as error:
            raise InputError(f"{where}: not valid JSON ({error.msg}, column {error.colno})") \
                from None
        if not isinstance(article, dict):
            raise InputError(f"{where}: expected a JSON object, got {type(article).__name__}")
        yield where, article


def _questions(where: str, article: dict, num_choices: int):
    """(question, options, label) of each question of an article, checked."""
    for key, kind in (("article", str), ("questions", list), ("options", list),
                      ("answers", list)):
        if not isinstance(article.get(key), kind):
            raise InputError(f"{where}: '{key}' must be a {'string' if kind is str else 'list'}")
    questions, options, answers = article["questions"], article["options"], article["answers"]
    if not len(questions) == len(options) == len(answers):
        raise InputError(f"{where}: {len(questions)} questions, {len(options)} option lists and "
                         f"{len(answers)} answers; they must be as many")
    letters = [chr(ord("A") + index) for index in range(num_choices)]
    for index, (question, choices, answer) in enumerate(zip(questions, options, answers)):
        if not isinstance(choices, list) or len(choices) != num_choices:
            count = len(choices) if isinstance(choices, list) else "no list of"
            raise InputError(f"{where}: question {index} has {count} options, expected "
                             f"{num_choices}")
        if answer not in letters:
            raise InputError(f"{where}: question {index} has answer {answer!r}, outside "
                             f"{letters[0]}–{letters[-1]}")
        if not isinstance(question, str) or not all(isinstance(c, str) for c in choices):
            raise InputError(f"{where}: question {index} and its options must be strings")
        yield question, choices, ord(answer) - ord("A")


def read_race(data_dir: str, split: str, levels: Sequence[str] = LEVELS,
              preprocess=lambda text: text, num_choices: int = 4) -> List[RaceExample]:
    """The examples of `split` in the original's reading order (middle, then high)."""
    examples = []
    for level in levels:
        for path in level_files(data_dir, split, level):
            for where, article in _articles(path):
                questions = list(_questions(where, article, num_choices))  # checked first
                context = preprocess(article["article"])
                article_id = str(article.get("id", io.basename(where)))
                for index, (question, choices, label) in enumerate(questions):
                    question = preprocess(question)
                    endings = []
                    for choice in choices:
                        option = preprocess(choice)
                        endings.append(question.replace("_", option) if "_" in question
                                       else question + " " + option)
                    examples.append(RaceExample(level, article_id, index, context,
                                                tuple(endings), label))
    return examples


@dataclasses.dataclass
class RaceFeatures:
    """Per option: ids, mask and segments of `max_seq_length` each; the answer's index."""

    input_ids: List[List[int]]
    input_mask: List[List[int]]
    segment_ids: List[List[int]]
    label_id: int


def convert_race_example(example: RaceExample, max_seq_length: int, max_qa_length: int,
                         tokenizer) -> RaceFeatures:
    context_tokens = tokenizer.tokenize(example.context)
    ids, masks, segments = [], [], []
    for ending in example.endings:
        qa_tokens = tokenizer.tokenize(ending)[-max_qa_length:]
        context = context_tokens[:max_seq_length - 3 - len(qa_tokens)]
        sequence = ([tokenizer.cls_id] + tokenizer.convert_tokens_to_ids(context)
                    + [tokenizer.sep_id] + tokenizer.convert_tokens_to_ids(qa_tokens)
                    + [tokenizer.sep_id])
        padding = [0] * (max_seq_length - len(sequence))
        ids.append(sequence + padding)
        masks.append([1] * len(sequence) + padding)
        segments.append([0] * (len(context) + 2) + [1] * (len(qa_tokens) + 1) + padding)
    return RaceFeatures(ids, masks, segments, example.label)


def serialize_race_features(features: RaceFeatures) -> bytes:
    """The original's record: the options' sequences concatenated."""
    def flat(rows):
        return [value for row in rows for value in row]

    return encode_example({
        "input_ids": ("int64", flat(features.input_ids)),
        "input_mask": ("int64", flat(features.input_mask)),
        "segment_ids": ("int64", flat(features.segment_ids)),
        "label_ids": ("int64", [features.label_id]),
        "is_real_example": ("int64", [1])})


def level_counts(examples: Sequence[RaceExample]) -> Dict[str, int]:
    """Examples per level, in reading order."""
    counts: Dict[str, int] = {}
    for example in examples:
        counts[example.level] = counts.get(example.level, 0) + 1
    return counts


def plan_race_cache(data_dir: str, split: str, cache_path: str, levels: Sequence[str],
                    max_seq_length: int, max_qa_length: int, tokenizer,
                    num_choices: int = 4) -> FeatureCache:
    """The feature cache of a split: reused when made with these settings, else read.

    Its settings record the split, levels, lengths, number of options,
    tokenizer and a hash of the source files; its counts, the examples per level.
    """
    sources = [path for level in levels for path in level_files(data_dir, split, level)]
    settings = {"task": "race", "split": split, "levels": list(levels),
                "max_seq_length": max_seq_length, "max_qa_length": max_qa_length,
                "num_choices": num_choices, **tokenizer_settings(tokenizer),
                "source_sha256": files_fingerprint(sources)}

    def read():
        examples = read_race(data_dir, split, levels, tokenizer.preprocess, num_choices)
        if not examples:
            raise InputError(f"RACE {split} ({', '.join(levels)}) holds no questions")
        return examples

    return FeatureCache.plan(cache_path, settings, read, level_counts)


def write_race_cache(cache: FeatureCache, max_seq_length: int, max_qa_length: int,
                     tokenizer) -> int:
    return cache.write(lambda example: serialize_race_features(
        convert_race_example(example, max_seq_length, max_qa_length, tokenizer)))
