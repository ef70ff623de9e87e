"""Is a sentence head's held-out accuracy above chance, and by how many standard errors?

Chance on a held-out set is its majority share: the accuracy of always
answering the commoner label (a set is rarely exactly balanced). An
accuracy measured on n examples has a standard error of sqrt(a (1 - a) / n);
a margin of 3 standard errors or more over the majority share is what the
docs call "above chance".
"""

import dataclasses
import math

import tensorflow as tf

ABOVE_CHANCE_STANDARD_ERRORS = 3.0


@dataclasses.dataclass(frozen=True)
class LabelCounts:
    ones: int
    total: int

    @property
    def majority_share(self) -> float:
        """The accuracy of always answering the commoner label."""
        return max(self.ones, self.total - self.ones) / self.total if self.total else float("nan")

    def margin(self, accuracy: float) -> float:
        """How many standard errors `accuracy` lies above the majority share."""
        return margin_in_standard_errors(accuracy, self.majority_share, self.total)


def standard_error(accuracy: float, examples: int) -> float:
    return math.sqrt(accuracy * (1 - accuracy) / examples) if examples else float("nan")


def margin_in_standard_errors(accuracy: float, majority_share: float, examples: int) -> float:
    error = standard_error(accuracy, examples)
    return (accuracy - majority_share) / error if error else float("nan")


def recall_by_label(accuracy: float, label_one_share: float, predicted_one_share: float) -> dict:
    """Each label's recall (the share of its pairs answered correctly), from the three shares
    an evaluation reports. Exact: with a = P(right), l = P(label 1), q = P(answer 1),
    P(answer 1 and label 1) = (a + l + q - 1) / 2."""
    both_one = (accuracy + label_one_share + predicted_one_share - 1) / 2
    both_zero = accuracy - both_one
    return {"0": both_zero / (1 - label_one_share) if label_one_share < 1 else float("nan"),
            "1": both_one / label_one_share if label_one_share > 0 else float("nan")}


def sentence_label_counts(records) -> LabelCounts:
    """Counts the sentence labels (`next_sentence_labels`) of pretraining records."""
    spec = {"next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64)}
    ones = total = 0
    for batch in tf.data.TFRecordDataset(records).batch(4096):
        labels = tf.io.parse_example(batch, spec)["next_sentence_labels"]
        ones += int(tf.reduce_sum(labels))
        total += int(tf.size(labels))
    return LabelCounts(ones, total)
