import pytest
import sentencepiece

from albert.errors import InputError
from albert.tokenization import SentencePieceTokenizer, is_start_piece, preprocess_text
from albert.tokenization.training import train_sentencepiece


def test_preprocess_text_follows_the_original_steps():
    assert preprocess_text("  Caf\u00e9   na\u00efve\t\n") == "Cafe naive"
    assert preprocess_text("\uff21\uff22 \u2460") == "AB 1"  # NFKD folds compatibility forms
    assert preprocess_text("\u00c9T\u00c9", lower=True) == "ete"
    assert preprocess_text("``quoted''") == "``quoted''"  # no quote rewriting (HF does)
    text = "  M\u00fcller \u1e9e  "
    assert preprocess_text(preprocess_text(text, lower=True), lower=True) == preprocess_text(text, lower=True)
    assert preprocess_text("a  b", remove_space=False) == "a  b"
    # ASCII text skips normalisation: the same result as the steps above.
    ascii_text = "".join(chr(code) for code in range(128))
    assert preprocess_text(ascii_text, lower=True) == " ".join(
        ascii_text.strip().split()).lower()


def test_piece_ids_equal_sentencepiece_lookups(synthetic_corpus):
    _, model = synthetic_corpus
    tokenizer = SentencePieceTokenizer(model)
    raw = sentencepiece.SentencePieceProcessor(model_file=model)
    pieces = tokenizer.vocab_words + ["not-a-piece", "\u2581zzzq", ""]
    assert tokenizer.convert_tokens_to_ids(pieces) == [raw.PieceToId(piece) for piece in pieces]
    text = "No commas here: 1990 and 42 Caf\u00e9s."  # returned as SentencePiece encodes it
    assert tokenizer.tokenize(text) == raw.EncodeAsPieces(preprocess_text(text, lower=True))


def test_special_ids_and_user_symbols_follow_the_official_recipe(synthetic_corpus):
    _, model = synthetic_corpus
    tokenizer = SentencePieceTokenizer(model)
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id,
            tokenizer.mask_id) == (0, 1, 2, 3, 4)
    assert tokenizer.convert_ids_to_tokens(range(13)) == [
        "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]", "(", ")", "\"", "-", ".", "\u2013", "\u00a3", "\u20ac"]
    # Control symbols are never produced from text.
    assert 2 not in tokenizer.encode("[CLS] text [SEP]")
    assert tokenizer.convert_tokens_to_ids(["no-such-piece"]) == [1]


def test_lower_casing_is_applied_by_the_tokenizer_itself(synthetic_corpus):
    _, model = synthetic_corpus
    lower = SentencePieceTokenizer(model, do_lower_case=True)
    assert lower.tokenize("KALO MITU") == lower.tokenize("kalo mitu")
    assert lower.tokenize("K\u00c1LO") == lower.tokenize("kalo")
    cased = SentencePieceTokenizer(model, do_lower_case=False)
    assert cased.tokenize("KALO") != cased.tokenize("kalo")


@pytest.fixture(scope="module")
def digit_comma_model(tmp_path_factory, synthetic_corpus):
    """A model whose vocabulary holds pieces ending in a digit and a comma."""
    corpus, _ = synthetic_corpus
    directory = tmp_path_factory.mktemp("digit_comma")
    return train_sentencepiece([corpus], str(directory / "spm"), vocab_size=1200,
                               user_defined_symbols=["(", ")", "\"", "-", ".", "\u2013", "\u00a3",
                                                     "\u20ac", "90,", "19"])


def test_digit_comma_rule_intended_and_python3_original(digit_comma_model):
    raw = sentencepiece.SentencePieceProcessor(model_file=digit_comma_model)
    assert raw.encode("in 1990,", out_type=str)[-2:] == ["19", "90,"]
    intended = SentencePieceTokenizer(digit_comma_model)
    original = SentencePieceTokenizer(digit_comma_model, digit_comma_rule="python3_original")
    reencoded = raw.encode("90", out_type=str)  # what the rule re-encodes, e.g. ['▁9', '0']
    assert reencoded[0].startswith("\u2581")
    expected_intended = [reencoded[0][1:]] if len(reencoded[0]) > 1 else []
    expected_intended += reencoded[1:] + [","]
    assert intended.tokenize("in 1990,")[-len(expected_intended):] == expected_intended
    assert original.tokenize("in 1990,")[-(len(reencoded) + 1):] == reencoded + [","]
    assert intended.has_digit_comma_pieces
    assert intended.encode("in 1990,") == intended.convert_tokens_to_ids(intended.tokenize("in 1990,"))


def test_start_piece_rule():
    # Start pieces: leading "▁" or "<", one punctuation character, or any
    # character outside a-z and punctuation (digits, apostrophe, "=", accents, "€").
    for piece in ["\u2581the", "<unk>", ",", "(", "90", "it's", "'", "=", "\u00e9t\u00e9", "\u20ac", "x2"]:
        assert is_start_piece(piece), piece
    # Continuations: only a-z and punctuation characters, no leading "▁".
    for piece in ["ing", "s", "ka-lo", "e.g"]:
        assert not is_start_piece(piece), piece


def test_missing_or_invalid_model_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="Cannot read SentencePiece model"):
        SentencePieceTokenizer(str(tmp_path / "missing.model"))
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"not a model")
    with pytest.raises(InputError, match="is not a SentencePiece model"):
        SentencePieceTokenizer(str(junk))
