"""A finished fine-tuning run's directory → the SavedModel that takes raw strings.

`python -m albert.export --model_dir=RUN --export_dir=DIR` writes `DIR/1/` for a run of
`run_classifier.py --train_file=...` (a classifier, regressor or multi-label classifier:
`albert.export.text_classifier`) or of `run_token_classifier.py` (a tagger:
`albert.export.token_tagger`), from the run directory alone: the same SavedModel as the
run's own `--export_dir`, with the labels, tokenizer and sequence length the run recorded.
"""

from albert.errors import InputError
from albert.export.text_classifier import export_text_classifier
from albert.export.token_tagger import export_token_tagger
from albert.finished_runs import TOKEN_CLASSIFICATION, Predictor, TokenPredictor, run_task_type


def export_finished_run(model_dir: str, export_dir: str, checkpoint: str = "model.ckpt-best",
                        overwrite: bool = False) -> tuple:
    """(the version directory written, the checkpoint exported)."""
    kind = run_task_type(model_dir)
    if kind == TOKEN_CLASSIFICATION:
        tagger = TokenPredictor(model_dir, checkpoint)
        _need_sentencepiece(tagger.tokenizer, model_dir)
        return export_token_tagger(tagger.model, tagger.tokenizer, tagger.tags, export_dir,
                                   tagger.max_seq_length, overwrite), tagger.source
    if not kind:
        raise InputError(f"{model_dir} holds a GLUE run: export it with --init_checkpoint="
                         f"{model_dir}/model.ckpt-best --task=classifier (serialized examples "
                         "in) or run_classifier.py --export_dir")
    classifier = Predictor(model_dir, checkpoint)
    _need_sentencepiece(classifier.tokenizer, model_dir)
    return export_text_classifier(classifier.model, classifier.tokenizer, classifier.task,
                                  export_dir, classifier.max_seq_length, overwrite), \
        classifier.source


def _need_sentencepiece(tokenizer, model_dir: str) -> None:
    if not hasattr(tokenizer, "model_proto"):
        raise InputError(f"{model_dir} was tokenized with a WordPiece vocabulary, which has no "
                         "in-graph tokenizer here; a SavedModel that takes strings needs a "
                         "SentencePiece model")
