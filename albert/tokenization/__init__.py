"""ALBERT tokenization: SentencePiece (with the original's preprocessing), WordPiece,
an in-graph tensorflow-text variant, and vocabulary training.

`load_tokenizer` picks SentencePiece when a model file is given and WordPiece
when only a vocabulary file is (the Chinese models), as the original does.
"""

from typing import Optional

from albert.errors import InputError
from albert.tokenization.sentencepiece_tokenizer import (DIGIT_COMMA_RULES, SentencePieceTokenizer,
                                                         is_start_piece)
from albert.tokenization.text import preprocess_text
from albert.tokenization.wordpiece import WordPieceTokenizer


def load_tokenizer(vocab_file: Optional[str] = None, spm_model_file: Optional[str] = None,
                   do_lower_case: bool = True, digit_comma_rule: str = "intended"):
    """The tokenizer the original's flags describe (`--spm_model_file` wins)."""
    if spm_model_file:
        return SentencePieceTokenizer(spm_model_file, do_lower_case, digit_comma_rule)
    if vocab_file:
        return WordPieceTokenizer(vocab_file, do_lower_case)
    raise InputError("Either a SentencePiece model (--spm_model_file) or a WordPiece vocabulary "
                     "(--vocab_file) is required")


def require_special_tokens(tokenizer) -> None:
    """Raises InputError unless the vocabulary has [CLS], [SEP] and [MASK]."""
    missing = [name for name, token_id in (("[CLS]", tokenizer.cls_id), ("[SEP]", tokenizer.sep_id),
                                           ("[MASK]", tokenizer.mask_id)) if token_id is None]
    if missing:
        source = getattr(tokenizer, "model_file", None) or getattr(tokenizer, "vocab_file", "")
        raise InputError(f"{source} has no {', '.join(missing)} symbol(s); ALBERT inputs need them "
                         "(train SentencePiece models with python -m albert.tokenization train)")


def require_vocabulary_within(tokenizer, vocab_size: int) -> None:
    """Raises InputError when the tokenizer makes ids the model has no embedding for.

    Checked before anything is written: otherwise the first training batch
    holding such an id fails deep inside TensorFlow.
    """
    if tokenizer.vocab_size > vocab_size:
        source = getattr(tokenizer, "model_file", None) or getattr(tokenizer, "vocab_file", "")
        raise InputError(f"{source} has {tokenizer.vocab_size} pieces, more than the config's "
                         f"vocab_size={vocab_size}: ids from {vocab_size} up have no embedding "
                         "(use the config and vocabulary of the same pretrained model)")


__all__ = [
    "DIGIT_COMMA_RULES",
    "SentencePieceTokenizer",
    "WordPieceTokenizer",
    "is_start_piece",
    "load_tokenizer",
    "require_special_tokens",
    "require_vocabulary_within",
    "preprocess_text",
]
