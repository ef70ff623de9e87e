"""WordPiece tokenization for `vocab.txt` vocabularies, e.g. the Chinese models."""

import unicodedata
from typing import Dict, List, Sequence

from albert import io
from albert.errors import InputError

UNK, CLS, SEP, MASK, PAD_ID = "[UNK]", "[CLS]", "[SEP]", "[MASK]", 0

_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def load_vocab(vocab_file: str) -> Dict[str, int]:
    """First whitespace-separated field of each line; ids in order, duplicates ignored."""
    vocab: Dict[str, int] = {}
    try:
        with io.open_file(vocab_file, "r") as handle:
            for line in handle:
                token = line.strip().split()[0] if line.strip() else " "
                if token not in vocab:
                    vocab[token] = len(vocab)
    except OSError as error:
        raise InputError(f"Cannot read vocabulary {vocab_file}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise InputError(f"{vocab_file} is not UTF-8 text: {error}") from None
    return vocab


def _is_whitespace(character: str) -> bool:
    return character in " \t\n\r" or unicodedata.category(character) == "Zs"


def _is_control(character: str) -> bool:
    return character not in "\t\n\r" and unicodedata.category(character) in ("Cc", "Cf")


def _is_punctuation(character: str) -> bool:
    code = ord(character)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(character).startswith("P")


def _is_cjk(character: str) -> bool:
    code = ord(character)
    return any(low <= code <= high for low, high in _CJK_RANGES)


def basic_tokenize(text: str, do_lower_case: bool) -> List[str]:
    """Clean, split CJK characters and punctuation, optionally lower-case and strip accents."""
    cleaned = []
    for character in text:
        if character in ("\x00", "\ufffd") or _is_control(character):
            continue
        if _is_whitespace(character):
            cleaned.append(" ")
        elif _is_cjk(character):
            cleaned.append(f" {character} ")
        else:
            cleaned.append(character)
    tokens = []
    for token in "".join(cleaned).split():
        if do_lower_case:
            token = unicodedata.normalize("NFD", token.lower())
            token = "".join(c for c in token if unicodedata.category(c) != "Mn")
        word = []
        for character in token:
            if _is_punctuation(character):
                if word:
                    tokens.append("".join(word))
                    word = []
                tokens.append(character)
            else:
                word.append(character)
        if word:
            tokens.append("".join(word))
    return [token for token in tokens if token]


class WordPieceTokenizer:
    """BERT-style basic + greedy longest-match-first WordPiece tokenizer.

    Args:
      vocab_file: one token per line (first whitespace-separated field).
      do_lower_case: lower-case and strip accents.
      max_input_chars_per_word: longer words become `[UNK]`.
    """

    def __init__(self, vocab_file: str, do_lower_case: bool = True,
                 max_input_chars_per_word: int = 200):
        self.vocab_file = vocab_file
        self.vocab = load_vocab(vocab_file)
        self.inverse_vocab = {index: token for token, index in self.vocab.items()}
        self.do_lower_case = do_lower_case
        self.max_input_chars_per_word = max_input_chars_per_word
        self.vocab_size = len(self.vocab)
        if UNK not in self.vocab:
            raise InputError(f"Vocabulary {vocab_file} lacks {UNK}")
        self.unk_id = self.vocab[UNK]
        # None when absent: building ALBERT inputs needs them, tokenizing does not.
        self.cls_id, self.sep_id, self.mask_id = (self.vocab.get(t) for t in (CLS, SEP, MASK))
        self.pad_id = PAD_ID

    def preprocess(self, text: str) -> str:
        return text.strip()

    def _wordpieces(self, word: str) -> List[str]:
        if len(word) > self.max_input_chars_per_word:
            return [UNK]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while start < end:
                candidate = word[start:end] if start == 0 else "##" + word[start:end]
                if candidate in self.vocab:
                    pieces.append(candidate)
                    break
                end -= 1
            else:
                return [UNK]
            start = end
        return pieces

    def encode_preprocessed(self, preprocessed: str) -> List[int]:
        return self.encode(preprocessed)

    def tokenize(self, text: str) -> List[str]:
        return [piece for word in basic_tokenize(text, self.do_lower_case)
                for piece in self._wordpieces(word)]

    def encode(self, text: str) -> List[int]:
        return self.convert_tokens_to_ids(self.tokenize(text))

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> List[int]:
        return [self.vocab[token] for token in tokens]

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> List[str]:
        return [self.inverse_vocab[int(token_id)] for token_id in ids]

    @property
    def vocab_words(self) -> List[str]:
        return list(self.vocab)

    def start_piece_table(self) -> List[bool]:
        """A WordPiece piece starts a word unless it begins with `##`."""
        table = [True] * (max(self.vocab.values()) + 1)
        for token, index in self.vocab.items():
            table[index] = not token.startswith("##")
        return table
