import os

import sentencepiece

from scripts import assert_clean_failure, run_script


def test_training_command_writes_a_model_with_the_official_ids(tmp_path, synthetic_corpus):
    corpus, _ = synthetic_corpus
    result = run_script("-m", "albert.tokenization", "train", f"--input={corpus}",
                        f"--model_prefix={tmp_path / 'vocab'}", "--vocab_size=900")
    assert result.returncode == 0, result.stderr
    model = sentencepiece.SentencePieceProcessor(model_file=str(tmp_path / "vocab.model"))
    assert model.get_piece_size() == 900
    assert [model.id_to_piece(i) for i in range(5)] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert model.bos_id() == -1 and model.eos_id() == -1
    assert sorted(os.listdir(tmp_path)) == ["vocab.model", "vocab.vocab"]


def test_training_is_deterministic(tmp_path, synthetic_corpus):
    from albert.tokenization.training import train_sentencepiece

    corpus, _ = synthetic_corpus
    first = train_sentencepiece([corpus], str(tmp_path / "a" / "spm"), vocab_size=700)
    second = train_sentencepiece([corpus], str(tmp_path / "b" / "spm"), vocab_size=700)
    assert open(first, "rb").read().replace(b"/a/", b"/b/") == open(second, "rb").read()


def test_impossible_vocabulary_size_fails_cleanly(tmp_path, synthetic_corpus):
    corpus, _ = synthetic_corpus
    result = run_script("-m", "albert.tokenization", "train", f"--input={corpus}",
                        f"--model_prefix={tmp_path / 'vocab'}", "--vocab_size=500000")
    assert_clean_failure(result, "SentencePiece training failed")
    assert not [name for name in os.listdir(tmp_path) if not name.startswith(".")]
