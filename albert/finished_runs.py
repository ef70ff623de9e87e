"""A finished fine-tuning run, loaded from its directory alone: its model, tokenizer and task.

A run of `run_classifier.py --train_file=...` or `run_token_classifier.py` keeps beside its
checkpoints everything needed to use it again: `albert_config.json`, the vocabulary
(`spm.model` or `vocab.txt`) and, in `run_settings.json`, the task (labels or tags, text
columns) with the feature settings (sequence length, lower-casing). `python -m albert.predict`
and `python -m albert.export --model_dir=...` load runs here.
"""

from albert import io, tokenization
from albert.checkpoints import ALBERT_CONFIG_FILE, assign_model_weights, read_checkpoint
from albert.config import AlbertConfig
from albert.errors import InputError
from albert.modeling import AlbertClassifier, AlbertTokenClassifier
from albert.tasks import file_classification, token_classification
from albert.tasks.finetuning import RUN_SETTINGS_FILE

TOKEN_CLASSIFICATION = "token_classification"


def run_tokenizer_and_config(model_dir: str, settings: dict):
    """(tokenizer, AlbertConfig, max_seq_length) a run directory was trained with."""
    spm = io.join(model_dir, file_classification.SPM_FILE)
    vocab = io.join(model_dir, file_classification.VOCAB_FILE)
    tokenizer = tokenization.load_tokenizer(
        None if io.exists(spm) else vocab, spm if io.exists(spm) else None,
        settings["do_lower_case"], settings.get("digit_comma_rule"))
    config = AlbertConfig.from_json_file(io.join(model_dir, ALBERT_CONFIG_FILE))
    return tokenizer, config, int(settings["max_seq_length"])


def run_checkpoint(model_dir: str, checkpoint: str, config, head: str, num_labels: int):
    """(path, weights) of the run's checkpoint to predict with."""
    path = checkpoint if io.exists(checkpoint + ".index") else io.join(model_dir, checkpoint)
    if not io.exists(path + ".index"):
        raise InputError(f"No checkpoint {path} (train with --do_eval, which keeps "
                         "model.ckpt-best, or name one with --checkpoint)")
    weights, _ = read_checkpoint(path, "tf1", config, heads="required", head=head,
                                 head_dims={"C": num_labels})
    return path, weights


def run_task_type(model_dir: str) -> str:
    path = io.join(model_dir, RUN_SETTINGS_FILE)
    if not io.exists(path):
        raise InputError(f"{model_dir} holds no fine-tuning run (no {RUN_SETTINGS_FILE})")
    return io.read_json(path).get("task_type", "")


class Predictor:
    """A run directory's model, tokenizer and task, loaded once."""

    def __init__(self, model_dir: str, checkpoint: str = "model.ckpt-best"):
        task = file_classification.task_of_run(model_dir)
        if task is None:
            raise InputError(f"{model_dir} holds no run of run_classifier.py --train_file=... "
                             f"(no task in its {RUN_SETTINGS_FILE})")
        settings = io.read_json(io.join(model_dir, RUN_SETTINGS_FILE))
        self.tokenizer, self.config, self.max_seq_length = run_tokenizer_and_config(
            model_dir, settings)
        self.task = task
        path, weights = run_checkpoint(model_dir, checkpoint, self.config, "classifier",
                                       task.num_labels)
        self.model = AlbertClassifier(self.config, task.num_labels)
        assign_model_weights(self.model, weights, path)
        self.source = path

    @property
    def pair(self) -> bool:
        return len(self.task.columns.text_columns) == 2

    def predict_rows(self, rows, batch_size: int):
        """(probabilities, predictions) of rows holding the task's text columns."""
        examples = self.task.examples(rows, self.tokenizer.preprocess, labelled=False,
                                      split="predict")
        return file_classification.predict(self.model, self.task, examples, self.tokenizer,
                                           self.max_seq_length, batch_size)


class TokenPredictor:
    """A tagger's run directory (run_token_classifier.py): its model, tokenizer and tags."""

    def __init__(self, model_dir: str, checkpoint: str = "model.ckpt-best"):
        if run_task_type(model_dir) != TOKEN_CLASSIFICATION:
            raise InputError(f"{model_dir} holds no run of run_token_classifier.py")
        settings = io.read_json(io.join(model_dir, RUN_SETTINGS_FILE))
        self.tags = tuple(settings["tags"])
        self.tokenizer, self.config, self.max_seq_length = run_tokenizer_and_config(
            model_dir, settings)
        path, weights = run_checkpoint(model_dir, checkpoint, self.config, "token_classifier",
                                       len(self.tags))
        self.model = AlbertTokenClassifier(self.config, len(self.tags))
        assign_model_weights(self.model, weights, path)
        self.source = path

    def tag(self, sentences, batch_size: int):
        """Each sentence's (tags, the chosen tags' probabilities)."""
        tagged = token_classification.tagged_set(sentences, self.tags, self.tokenizer,
                                                 self.max_seq_length)
        logits = token_classification.tag_logits(self.model, tagged, batch_size)
        probabilities, predicted = token_classification.word_predictions(logits, tagged)
        return [([self.tags[i] for i in indices], [float(p[k, i]) for k, i in enumerate(indices)])
                for p, indices in zip(probabilities, predicted)]
