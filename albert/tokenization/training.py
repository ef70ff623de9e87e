"""Train a SentencePiece vocabulary with the official ALBERT recipe."""

import hashlib
import logging
import os
import shutil
import tempfile
from typing import Sequence

import sentencepiece

from albert import io
from albert.errors import InputError

logger = logging.getLogger("albert")

# The official `spm_train` recipe, with list-valued symbols passed as lists:
# the Python trainer splits the string form CSV-style, so its quote character
# would swallow the rest of the list. `--logtostderr` is not a
# trainer option and is dropped. Ids: <pad> 0, <unk> 1, [CLS] 2, [SEP] 3,
# [MASK] 4, then the user symbols at 5-12.
OFFICIAL_RECIPE = dict(
    pad_id=0,
    unk_id=1,
    eos_id=-1,
    bos_id=-1,
    control_symbols=["[CLS]", "[SEP]", "[MASK]"],
    user_defined_symbols=["(", ")", "\"", "-", ".", "\u2013", "\u00a3", "\u20ac"],
    shuffle_input_sentence=True,
    input_sentence_size=10_000_000,
    character_coverage=0.99995,
    model_type="unigram",
)


def train_sentencepiece(input_files: Sequence[str], model_prefix: str, vocab_size: int = 30000,
                        num_threads: int = os.cpu_count() or 1, seed: int = 0,
                        **overrides) -> str:
    """Trains `<model_prefix>.model` and `.vocab`; returns the model path.

    Files appear only when training succeeds. `overrides` replace recipe
    options (e.g. `input_sentence_size` for a quick run). Training is
    deterministic for a fixed `seed` and input.
    """
    missing = [path for path in input_files if not io.exists(path)]
    if missing:
        raise InputError(f"Input file(s) not found: {', '.join(missing)}")
    options = dict(OFFICIAL_RECIPE, vocab_size=vocab_size, num_threads=num_threads,
                   minloglevel=1, **overrides)
    sentencepiece.set_random_generator_seed(seed)
    # The trainer reads and writes local files only, and records the prefix
    # it wrote to inside the model: the scratch name is fixed per output
    # prefix so identical runs give identical models.
    if io.is_remote(model_prefix):
        digest = hashlib.sha1(model_prefix.encode("utf-8")).hexdigest()[:12]
        scratch = os.path.join(tempfile.gettempdir(), f"albert-spm-training-{digest}")
    else:
        scratch = os.path.join(os.path.dirname(os.path.abspath(model_prefix)),
                               f".{os.path.basename(model_prefix)}.spm-training")
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    scratch_prefix = os.path.join(scratch, os.path.basename(model_prefix))
    try:
        local_inputs = []
        for index, path in enumerate(input_files):
            if io.is_remote(path):
                local_inputs.append(os.path.join(scratch, f"input-{index}.txt"))
                io.copy(path, local_inputs[-1])
            else:
                local_inputs.append(path)
        sentencepiece.SentencePieceTrainer.train(
            input=",".join(local_inputs), model_prefix=scratch_prefix, **options)
        for suffix in (".model", ".vocab"):
            with open(scratch_prefix + suffix, "rb") as handle:
                io.write_bytes_atomically(model_prefix + suffix, handle.read())
    except RuntimeError as error:
        raise InputError(f"SentencePiece training failed: {str(error).strip()}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    logger.info("Wrote %s.model and %s.vocab (%d pieces)", model_prefix, model_prefix, vocab_size)
    return model_prefix + ".model"
