from albert.tokenization import WordPieceTokenizer, load_tokenizer
from albert.tokenization.wordpiece import basic_tokenize


def _vocab(tmp_path, tokens):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return str(path)


def test_reference_case_of_the_original(tmp_path):
    vocab = _vocab(tmp_path, ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un",
                              "runn", "##ing", ","])
    tokenizer = load_tokenizer(vocab_file=vocab, do_lower_case=True)
    assert isinstance(tokenizer, WordPieceTokenizer)
    assert tokenizer.tokenize("UNwant\u00e9d,running") == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tokenizer.encode("unwanted running") == [7, 4, 5, 8, 9]
    assert tokenizer.tokenize("unwantedX") == ["[UNK]"]


def test_basic_tokenizer_splits_cjk_punctuation_and_cleans_control_characters():
    assert basic_tokenize("ah\u535a\u63a8zz", do_lower_case=True) == ["ah", "\u535a", "\u63a8", "zz"]
    assert basic_tokenize(" \tHeLLo!how  \n Are yoU?  ", do_lower_case=True) == [
        "hello", "!", "how", "are", "you", "?"]
    assert basic_tokenize("H\u00e4LLo!", do_lower_case=False) == ["H\u00e4LLo", "!"]
    assert basic_tokenize("a\x00b\ufffdc\u200bd", do_lower_case=False) == ["abcd"]


def test_ids_follow_unique_tokens_and_start_pieces(tmp_path):
    vocab = _vocab(tmp_path, ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "a", "##b"])
    tokenizer = WordPieceTokenizer(vocab)
    assert tokenizer.vocab == {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "a": 5, "##b": 6}
    assert tokenizer.start_piece_table() == [True, True, True, True, True, True, False]
    assert (tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id) == (2, 3, 4)
