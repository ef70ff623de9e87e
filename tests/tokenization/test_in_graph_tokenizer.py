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
