"""Tagged sentences (a tag per word) from CoNLL-style or JSON Lines files, and their features.

Formats (by extension: `.jsonl`/`.json`/`.ndjson` are JSON Lines, anything else CoNLL; or
`--file_format`):

* CoNLL: one word per line, its columns separated by whitespace (tabs or spaces); the word
  is the first column, the tag the last (or `--tag_column`, counted from 0). Sentences are
  separated by blank lines. `-DOCSTART-` lines are skipped. Every line of a file must have
  the same number of columns.
* JSON Lines: one sentence per line, an object with a list of words (`tokens`) and a list of
  tags (`tags`) of the same length (the key names can be set).

Features. Each word is split into SentencePiece pieces on its own. A word for which the
tokenizer gives no piece (a lone control character, say) becomes one `<unk>` piece, so it is
still tagged; it is never dropped. The word's tag is learnt and predicted on its first piece.
The other pieces are left out of the loss, as Hugging Face does by default; with
`label_all_pieces`, each piece gets the word's tag. A sentence longer than `max_seq_length - 2`
pieces is cut into windows that overlap by half (`[CLS] pieces [SEP]`). Every window is
trained on. Each word is predicted once, from the window where its first piece has the most
context: the larger of the pieces to its left and to its right, as SQuAD's windows choose.
"""

import dataclasses
import json
import logging
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from albert import io
from albert.errors import InputError
from albert.finetuning_data.labelled_files import utf8_lines

logger = logging.getLogger("albert")

FORMATS = ("conll", "jsonl")
IGNORED = -1   # label of a position left out of the loss and of the scores


@dataclasses.dataclass(frozen=True)
class Sentence:
    where: str                     # "file:line" of its first word
    words: Tuple[str, ...]
    tags: Optional[Tuple[str, ...]]


def file_format(path: str, given: Optional[str] = None) -> str:
    if given:
        if given not in FORMATS:
            raise InputError(f"--file_format must be one of {', '.join(FORMATS)}, not {given!r}")
        return given
    name = path[:-3] if path.endswith(".gz") else path
    return "jsonl" if name.lower().endswith((".jsonl", ".json", ".ndjson")) else "conll"


def _text(path: str) -> str:
    """The file's text, read as the own-files readers read theirs (UTF-8, BOM dropped)."""
    with utf8_lines(path) as lines:
        return "".join(lines)


def _json_object(line: str) -> bool:
    """Whether a line is a JSON object (a CoNLL word may start with "{": `{0,T}` in Brown)."""
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _conll(path: str, text: str, tag_column: Optional[int], tagged: bool) -> List[Sentence]:
    sentences, words, tags, start, width = [], [], [], None, None

    def close():
        nonlocal words, tags, start
        if words:
            sentences.append(Sentence(f"{path}:{start}", tuple(words),
                                      tuple(tags) if tagged else None))
        words, tags, start = [], [], None

    for number, line in enumerate(io.split_lines(text), start=1):
        if not line.strip():
            close()
            continue
        columns = line.split()
        if columns[0] == "-DOCSTART-":
            close()
            continue
        if line.lstrip().startswith("{") and _json_object(line):
            raise InputError(f"{path}:{number}: this looks like JSON Lines, not CoNLL; name the "
                             "file .jsonl or pass --file_format=jsonl")
        if width is None:
            width = len(columns)
            if tagged and width < 2:
                raise InputError(f"{path}:{number}: one column; a tagged CoNLL line holds a word "
                                 "and its tag")
        elif len(columns) != width:
            raise InputError(f"{path}:{number}: {len(columns)} columns, the file's first line "
                             f"has {width}")
        if start is None:
            start = number
        words.append(columns[0])
        if tagged:
            column = width - 1 if tag_column is None else tag_column
            if not -width <= column < width or column == 0:
                raise InputError(f"{path}:{number}: --tag_column={tag_column} is not a tag column "
                                 f"of its {width} columns (0 is the word)")
            tags.append(columns[column])
    close()
    return sentences


def _jsonl(path: str, text: str, words_key: str, tags_key: str, tagged: bool) -> List[Sentence]:
    sentences = []
    for number, line in enumerate(io.split_lines(text), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{path}:{number}: not a JSON object ({error.msg}); a CoNLL file "
                             "needs another extension or --file_format=conll") from None
        where = f"{path}:{number}"
        if not isinstance(value, dict) or words_key not in value:
            keys = ", ".join(map(repr, value)) if isinstance(value, dict) else type(value).__name__
            raise InputError(f"{where}: no {words_key!r} list (found {keys})")
        words = value[words_key]
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise InputError(f"{where}: {words_key!r} must be a list of strings")
        if not words:
            raise InputError(f"{where}: an empty sentence (no words)")
        tags = None
        if tagged:
            tags = value.get(tags_key)
            if not isinstance(tags, list) or not all(isinstance(t, (str, int)) for t in tags):
                raise InputError(f"{where}: no {tags_key!r} list of tags")
            if len(tags) != len(words):
                raise InputError(f"{where}: {len(words)} words but {len(tags)} tags")
            tags = tuple(str(tag) for tag in tags)
        sentences.append(Sentence(where, tuple(words), tags))
    return sentences


def read_sentences(pattern: str, given_format: Optional[str], tagged: bool, what: str,
                   tag_column: Optional[int] = None, words_key: str = "tokens",
                   tags_key: str = "tags") -> List[Sentence]:
    """The sentences of every file of `pattern` (comma-separated files and globs)."""
    sentences = []
    for path in io.expand_file_patterns(pattern, what):
        text = _text(path)
        fmt = file_format(path, given_format)
        found = (_jsonl(path, text, words_key, tags_key, tagged) if fmt == "jsonl"
                 else _conll(path, text, tag_column, tagged))
        for sentence in found:
            if any(not word.strip() for word in sentence.words):
                raise InputError(f"{sentence.where}: an empty word")
        sentences.extend(found)
    if not sentences:
        raise InputError(f"{pattern} ({what}) holds no sentence")
    return sentences


def tag_set(sentences: Sequence[Sentence]) -> Tuple[str, ...]:
    """The training tags in a fixed order: `O` first (where there is one), the others sorted."""
    tags = {tag for sentence in sentences for tag in sentence.tags}
    return tuple(sorted(tags, key=lambda tag: (tag != "O", tag)))


def check_tags(sentences: Sequence[Sentence], tags: Sequence[str]) -> None:
    known = set(tags)
    for sentence in sentences:
        for index, tag in enumerate(sentence.tags):
            if tag not in known:
                line = sentence.where
                if sentence.where.rsplit(":", 1)[-1].isdigit() and "jsonl" not in line:
                    path, first = sentence.where.rsplit(":", 1)
                    line = f"{path}:{int(first) + index}"
                shown = ", ".join(tags[:30]) + (f", and {len(tags) - 30} more"
                                                 if len(tags) > 30 else "")
                raise InputError(f"{line}: tag {tag!r} was never seen in the training file "
                                 f"(its tags: {shown})")


def most_frequent_tags(sentences: Sequence[Sentence]) -> Tuple[Dict[str, str], str]:
    """(each training word's commonest tag, the commonest tag overall): the baseline tagger."""
    by_word: Dict[str, Dict[str, int]] = {}
    overall: Dict[str, int] = {}
    for sentence in sentences:
        for word, tag in zip(sentence.words, sentence.tags):
            counts = by_word.setdefault(word, {})
            counts[tag] = counts.get(tag, 0) + 1
            overall[tag] = overall.get(tag, 0) + 1
    pick = lambda counts: max(sorted(counts), key=lambda tag: counts[tag])  # noqa: E731
    return {word: pick(counts) for word, counts in by_word.items()}, pick(overall)


# ------------------------------------------------------------------ features
@dataclasses.dataclass
class WindowFeatures:
    """One window of one sentence."""

    input_ids: List[int]
    label_ids: List[int]       # IGNORED where not learnt
    word_ids: List[int]        # the word of each scored position (IGNORED elsewhere)
    sentence: int


def word_pieces(words: Sequence[str], tokenizer) -> List[List[int]]:
    """Each word's piece ids; a word without pieces gets one `<unk>`."""
    pieces = []
    for word in words:
        ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word))
        pieces.append(ids or [tokenizer.unk_id])
    return pieces


def windows(sentence_index: int, pieces: Sequence[Sequence[int]], tag_ids: Optional[Sequence[int]],
            max_seq_length: int, tokenizer, label_all_pieces: bool = False) -> List[WindowFeatures]:
    """The windows of one sentence; each word is scored (word_ids) in exactly one of them."""
    flat, owner, first = [], [], []
    for word, ids in enumerate(pieces):
        for position, piece in enumerate(ids):
            flat.append(piece)
            owner.append(word)
            first.append(position == 0)
    budget = max_seq_length - 2
    stride = max(1, budget // 2)
    starts = list(range(0, max(len(flat) - budget, 0) + 1, stride))
    if starts[-1] + budget < len(flat):
        starts.append(len(flat) - budget)
    # The window that gives each word's first piece the most context.
    best: Dict[int, Tuple[int, int]] = {}
    for window, start in enumerate(starts):
        end = min(start + budget, len(flat))
        for position in range(start, end):
            if first[position]:
                # In whole numbers, so that ties are exact (the exported graph's rule too).
                context = 100 * min(position - start, end - 1 - position) + (end - start)
                if owner[position] not in best or context > best[owner[position]][0]:
                    best[owner[position]] = (context, window)
    features = []
    for window, start in enumerate(starts):
        end = min(start + budget, len(flat))
        labels, scored = [IGNORED], [IGNORED]
        for position in range(start, end):
            word = owner[position]
            learnt = first[position] or label_all_pieces
            labels.append(tag_ids[word] if tag_ids is not None and learnt else IGNORED)
            scored.append(word if first[position] and best[word][1] == window else IGNORED)
        ids = [tokenizer.cls_id, *flat[start:end], tokenizer.sep_id]
        features.append(WindowFeatures(ids, labels + [IGNORED], scored + [IGNORED],
                                       sentence_index))
    return features


def stack(features: Sequence[WindowFeatures], max_seq_length: int) -> Dict[str, np.ndarray]:
    """Windows as padded arrays in the encoder's layout, with `label_ids`, `word_ids` and
    `sentence_ids`."""
    count = len(features)
    arrays = {"input_word_ids": np.zeros((count, max_seq_length), np.int32),
              "input_mask": np.zeros((count, max_seq_length), np.int32),
              "input_type_ids": np.zeros((count, max_seq_length), np.int32),
              "label_ids": np.full((count, max_seq_length), IGNORED, np.int32),
              "word_ids": np.full((count, max_seq_length), IGNORED, np.int32),
              "sentence_ids": np.array([f.sentence for f in features], np.int32)}
    for row, feature in enumerate(features):
        length = len(feature.input_ids)
        arrays["input_word_ids"][row, :length] = feature.input_ids
        arrays["input_mask"][row, :length] = 1
        arrays["label_ids"][row, :length] = feature.label_ids
        arrays["word_ids"][row, :length] = feature.word_ids
    return arrays


def format_sentences(sentences: Sequence[Sentence], tags: Sequence[Sequence[str]], fmt: str,
                     words_key: str = "tokens", tags_key: str = "tags") -> str:
    """Sentences with (predicted) tags: CoNLL (`word<TAB>tag`, a blank line after each
    sentence) or JSON Lines (`{words_key: [...], tags_key: [...]}`)."""
    if fmt == "jsonl":
        return "".join(json.dumps({words_key: list(s.words), tags_key: list(t)},
                                  ensure_ascii=False) + "\n" for s, t in zip(sentences, tags))
    return "".join("".join(f"{word}\t{tag}\n" for word, tag in zip(s.words, t)) + "\n"
                   for s, t in zip(sentences, tags))
