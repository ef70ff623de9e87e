import pytest
import tensorflow as tf

from albert.tokenization import SentencePieceTokenizer
from albert.tokenization.in_graph import InGraphSentencePieceTokenizer
from albert.tokenization.training import train_sentencepiece

TRICKY = [
    "  Caf\u00e9 \u00e0 la cr\u00e8me\u00a0 br\u00fbl\u00e9e  ",
    "\u039f\u0394\u039f\u03a3 \u039a\u0391\u0399 \u03a3\u039f\u03a6\u0399\u0391\u03a3. \u039f\u0394\u039f\u03a3.",
    "tabs\tand\u2003em\u3000spaces\u2028line",
    "\uff26\uff35\uff2c\uff2c\uff37\uff29\uff24\uff34\uff28 \u2460 \ufb01 \u00bd",
    "numbers 1990, 2,000, 3.5 and (brackets) \u2013 dashes",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0939\u093f\u0928\u094d\u0926\u0940",
    "",
    "   ",
]


def _compare(python_tokenizer, lines):
    in_graph = InGraphSentencePieceTokenizer(python_tokenizer)
    ours = in_graph.tokenize(tf.constant(lines)).to_list()
    expected = [python_tokenizer.encode(line) for line in lines]
    mismatches = [(line, a, b) for line, a, b in zip(lines, ours, expected) if a != b]
    assert not mismatches, mismatches[:3]


def test_in_graph_ids_equal_python_ids_on_the_real_corpus(demo_corpus):
    directory, model = demo_corpus
    with open(f"{directory}/train.txt", encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line in handle][:3000]
    assert len([line for line in lines if line]) >= 1000
    _compare(SentencePieceTokenizer(model), lines)
    _compare(SentencePieceTokenizer(model, do_lower_case=False), lines[:1000])


@pytest.mark.parametrize("lower", [True, False])
def test_in_graph_ids_equal_python_ids_on_tricky_text(demo_corpus, lower):
    _, model = demo_corpus
    _compare(SentencePieceTokenizer(model, do_lower_case=lower), TRICKY)


@pytest.mark.parametrize("rule", ["intended", "python3_original"])
def test_in_graph_digit_comma_rule(tmp_path, synthetic_corpus, rule):
    corpus, _ = synthetic_corpus
    model = train_sentencepiece([corpus], str(tmp_path / "spm"), vocab_size=1200,
                                user_defined_symbols=["90,", "19", "0,"])
    tokenizer = SentencePieceTokenizer(model, digit_comma_rule=rule)
    lines = ["in 1990, then 2000, kalo", "90, 190,", "x0, mitu", "plain words"]
    _compare(tokenizer, lines)
    assert tokenizer.encode(lines[0]) != SentencePieceTokenizer(
        model, digit_comma_rule="intended" if rule != "intended" else "python3_original").encode(lines[0])


def _check_offsets(python_tokenizer, lines):
    """Pieces equal tokenize(); each piece's text comes from its input span, in order."""
    in_graph = InGraphSentencePieceTokenizer(python_tokenizer)
    ids, starts, ends = in_graph.tokenize_with_offsets(tf.constant(lines))
    assert ids.to_list() == in_graph.tokenize(tf.constant(lines)).to_list()
    for line, row_ids, row_starts, row_ends in zip(lines, ids.to_list(), starts.to_list(),
                                                   ends.to_list()):
        data = line.encode("utf-8")
        assert row_starts == sorted(row_starts) and len(row_starts) == len(row_ids)
        for piece_id, start, end in zip(row_ids, row_starts, row_ends):
            piece = python_tokenizer.sp_model.IdToPiece(piece_id).replace("\u2581", "")
            assert 0 <= start <= end <= len(data) and (start < end or not piece), (line, start, end)
            span = python_tokenizer.preprocess(data[start:end].decode("utf-8"))
            if piece and piece_id != python_tokenizer.sp_model.unk_id():
                # (a final sigma is lower-cased by its context, which a span alone lacks)
                assert piece.replace("\u03c2", "\u03c3") in span.replace("\u03c2", "\u03c3"), \
                    (line, piece, span)


@pytest.mark.parametrize("lower", [True, False])
def test_offsets_point_into_the_input(demo_corpus, lower):
    directory, model = demo_corpus
    with open(f"{directory}/train.txt", encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line in handle if line.strip()][:300]
    _check_offsets(SentencePieceTokenizer(model, do_lower_case=lower), TRICKY + lines)


def test_offsets_with_the_digit_comma_rule(tmp_path, synthetic_corpus):
    corpus, _ = synthetic_corpus
    model = train_sentencepiece([corpus], str(tmp_path / "spm"), vocab_size=1200,
                                user_defined_symbols=["90,", "19", "0,"])
    tokenizer = SentencePieceTokenizer(model)
    lines = ["in 1990, then 2000, kalo", "90, 190,", "x0, mitu", "plain words"]
    _check_offsets(tokenizer, lines)
    _, starts, ends = InGraphSentencePieceTokenizer(tokenizer).tokenize_with_offsets(
        tf.constant(lines[:1]))
    spans = [lines[0].encode()[a:b].decode() for a, b in zip(starts[0].numpy(), ends[0].numpy())]
    assert "," in spans   # the comma split off "90," has its own one-byte span
