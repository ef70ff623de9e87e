"""SentencePiece tokenization as the original ALBERT does it."""

import string
from typing import List, Sequence

import sentencepiece

from albert import io
from albert.errors import InputError
from albert.tokenization.text import preprocess_text

SPIECE_UNDERLINE = "\u2581"
PAD, UNK, CLS, SEP, MASK = "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"

# ASCII punctuation except ' < = > (the original's list).
_START_PUNCTUATION = frozenset(set(string.punctuation) - set("'<=>"))
_WORD_CHARACTERS = frozenset(string.ascii_lowercase) | _START_PUNCTUATION

DIGIT_COMMA_RULES = ("intended", "python3_original")


def is_start_piece(piece: str) -> bool:
    """Whether a SentencePiece piece starts a word, for whole-word masking.

    True if the piece starts with `▁` or `<`, is one punctuation character, or
    has any character (lower-cased) outside a-z and punctuation — so digits,
    apostrophes and non-Latin letters make a piece a word of its own. (The
    original also meant to add `€` and `£` to the punctuation, as byte strings
    that never match; they are start pieces anyway by the last rule.)
    """
    if piece.startswith(SPIECE_UNDERLINE) or piece.startswith("<") or piece in _START_PUNCTUATION:
        return True
    return not all(character.lower() in _WORD_CHARACTERS for character in piece)


class SentencePieceTokenizer:
    """The ALBERT tokenizer for a SentencePiece model (`30k-clean.model`).

    `tokenize` applies `preprocess_text(text, lower=do_lower_case)` itself
    (the original's tokenizer ignored `do_lower_case` and relied on every
    caller to do it; preprocessing is idempotent, so both agree), encodes, and
    splits pieces that end in a digit followed by a comma (`"90,"` ->
    `"9" "0" ","`).

    Args:
      model_file: path of the SentencePiece model.
      do_lower_case: lower-case during preprocessing (True for released models).
      digit_comma_rule: "intended" (default; also what Hugging Face and Model
        Garden do) or "python3_original": the original under Python 3 compares
        a text piece with a byte string, so the leading `▁` of the re-encoded
        digits is never removed.

    Example:
        tokenizer = SentencePieceTokenizer("30k-clean.model")
        ids = tokenizer.encode("Hello world")   # no [CLS]/[SEP]
    """

    def __init__(self, model_file: str, do_lower_case: bool = True,
                 digit_comma_rule: str = "intended"):
        if digit_comma_rule not in DIGIT_COMMA_RULES:
            raise ValueError(f"digit_comma_rule must be one of {DIGIT_COMMA_RULES}")
        self.model_file = model_file
        self.do_lower_case = do_lower_case
        self.digit_comma_rule = digit_comma_rule
        try:
            model_proto = io.read_bytes(model_file)
        except OSError as error:
            raise InputError(f"Cannot read SentencePiece model {model_file}: {error.strerror}") from None
        self._load(model_proto)

    def __getstate__(self) -> dict:
        # Picklable (worker processes get the tokenizer): the model travels as its bytes.
        return {"model_file": self.model_file, "do_lower_case": self.do_lower_case,
                "digit_comma_rule": self.digit_comma_rule, "model_proto": self.model_proto}

    def __setstate__(self, state: dict) -> None:
        self.model_file = state["model_file"]
        self.do_lower_case = state["do_lower_case"]
        self.digit_comma_rule = state["digit_comma_rule"]
        self._load(state["model_proto"])

    def _load(self, model_proto: bytes) -> None:
        self.model_proto = model_proto
        self.sp_model = sentencepiece.SentencePieceProcessor()
        try:
            self.sp_model.LoadFromSerializedProto(model_proto)
        except RuntimeError as error:
            raise InputError(f"{self.model_file} is not a SentencePiece model: {error}") from None
        self.vocab_size = self.sp_model.GetPieceSize()
        self.unk_id = self.sp_model.unk_id()
        # None when the model lacks the symbol (any SentencePiece model can
        # tokenize; building ALBERT inputs needs the ALBERT symbols).
        self.pad_id, self.cls_id, self.sep_id, self.mask_id = (
            self._special_id(piece) for piece in (PAD, CLS, SEP, MASK))
        # The digit-comma rule can only fire on vocabulary pieces that end in a
        # digit and a comma; without any, ids can be encoded directly.
        pieces = [self.sp_model.IdToPiece(i) for i in range(self.vocab_size)]
        self.has_digit_comma_pieces = any(
            len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit() for piece in pieces)
        # Piece -> id in one dict lookup: SentencePiece's `PieceToId` costs a Python wrapper
        # call per piece, which made it the largest part of feature creation. The same ids,
        # the first id of a piece, `<unk>` for a piece outside the vocabulary.
        self._piece_ids = {}
        for token_id, piece in enumerate(pieces):
            self._piece_ids.setdefault(piece, token_id)

    def _special_id(self, piece: str):
        token_id = self.sp_model.PieceToId(piece)
        return None if token_id == self.unk_id else token_id

    # --------------------------------------------------------------- text
    def preprocess(self, text: str) -> str:
        return preprocess_text(text, lower=self.do_lower_case)

    def encode_pieces(self, preprocessed: str) -> List[str]:
        """Pieces of already preprocessed text, with the digit-comma rule."""
        pieces = self.sp_model.EncodeAsPieces(preprocessed)
        if "," not in "".join(pieces):  # the common case, checked at C speed
            return pieces
        output = []
        for piece in pieces:
            if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
                output.extend(self._split_digit_comma(piece))
            else:
                output.append(piece)
        return output

    def _split_digit_comma(self, piece: str) -> List[str]:
        pieces = self.sp_model.EncodeAsPieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
        if (self.digit_comma_rule == "intended" and not piece.startswith(SPIECE_UNDERLINE)
                and pieces and pieces[0].startswith(SPIECE_UNDERLINE)):
            if len(pieces[0]) == 1:
                pieces = pieces[1:]
            else:
                pieces[0] = pieces[0][1:]
        return pieces + [piece[-1]]

    def encode_preprocessed(self, preprocessed: str) -> List[int]:
        """Ids of already preprocessed text (what `encode` does after preprocessing)."""
        if not self.has_digit_comma_pieces:
            return self.sp_model.EncodeAsIds(preprocessed)
        return self.convert_tokens_to_ids(self.encode_pieces(preprocessed))

    def tokenize(self, text: str) -> List[str]:
        """Preprocesses `text` and returns its pieces."""
        return self.encode_pieces(self.preprocess(text))

    def encode(self, text: str) -> List[int]:
        """Token ids of `text` (no special tokens)."""
        return self.encode_preprocessed(self.preprocess(text))

    # ------------------------------------------------------------ vocabulary
    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> List[int]:
        """Unknown pieces map to `<unk>`."""
        piece_ids, unk_id = self._piece_ids, self.unk_id
        return [piece_ids.get(token, unk_id) for token in tokens]

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> List[str]:
        return [self.sp_model.IdToPiece(int(token_id)) for token_id in ids]

    @property
    def vocab_words(self) -> List[str]:
        """All pieces in id order, specials included (the random-replacement pool)."""
        return [self.sp_model.IdToPiece(i) for i in range(self.vocab_size)]

    def start_piece_table(self) -> List[bool]:
        """`is_start_piece` of every id, for masking on ids."""
        return [is_start_piece(piece) for piece in self.vocab_words]
