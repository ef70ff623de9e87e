"""Pretraining losses and metrics, exactly as the original (SPEC §5.1, §5.4)."""

from keras import ops


def _label_log_probabilities(logits, labels):
    log_probabilities = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    labels = ops.cast(labels, "int32")[..., None]
    return ops.take_along_axis(log_probabilities, labels, axis=-1)[..., 0]


def masked_lm_example_losses(mlm_logits, masked_lm_ids):
    """Cross-entropy per masked position, [B, P]."""
    return -_label_log_probabilities(mlm_logits, masked_lm_ids)


def masked_lm_loss(mlm_logits, masked_lm_ids, masked_lm_weights):
    """`Σ w · CE / (Σ w + 1e-5)` over all masked positions of the batch."""
    weights = ops.cast(masked_lm_weights, "float32")
    losses = masked_lm_example_losses(mlm_logits, masked_lm_ids)
    return ops.sum(weights * losses) / (ops.sum(weights) + 1e-5)


def sentence_order_loss(sentence_order_logits, sentence_order_labels):
    """Mean cross-entropy of the 2-way sentence-order head over the batch."""
    labels = ops.reshape(sentence_order_labels, (-1,))
    return ops.mean(-_label_log_probabilities(sentence_order_logits, labels))


def pretraining_losses(outputs, features):
    """Losses of one batch: `masked_lm_loss`, `sentence_order_loss` and their sum `loss`.

    `features` holds the pretraining TFRecord features `masked_lm_ids`,
    `masked_lm_weights` and `next_sentence_labels` (the SOP label, named as in
    the original data format).
    """
    mlm = masked_lm_loss(outputs["mlm_logits"], features["masked_lm_ids"],
                         features["masked_lm_weights"])
    sop = sentence_order_loss(outputs["sentence_order_logits"], features["next_sentence_labels"])
    return {"loss": mlm + sop, "masked_lm_loss": mlm, "sentence_order_loss": sop}


def pretraining_metric_sums(outputs, features):
    """Numerators and denominators of the evaluation metrics for one batch.

    Returns `{name: (total, count)}`; summing both over batches and dividing
    gives the original's streaming metrics: `masked_lm_accuracy` and
    `masked_lm_loss` weighted by `masked_lm_weights`, `sentence_order_accuracy`
    and `sentence_order_loss` averaged over examples.
    """
    weights = ops.cast(features["masked_lm_weights"], "float32")
    mlm_logits = outputs["mlm_logits"]
    mlm_ids = ops.cast(features["masked_lm_ids"], "int32")
    mlm_correct = ops.cast(ops.equal(ops.cast(ops.argmax(mlm_logits, axis=-1), "int32"), mlm_ids),
                           "float32")
    mlm_losses = masked_lm_example_losses(mlm_logits, mlm_ids)

    sop_logits = outputs["sentence_order_logits"]
    sop_labels = ops.cast(ops.reshape(features["next_sentence_labels"], (-1,)), "int32")
    sop_correct = ops.cast(
        ops.equal(ops.cast(ops.argmax(sop_logits, axis=-1), "int32"), sop_labels), "float32")
    sop_losses = -_label_log_probabilities(sop_logits, sop_labels)
    num_examples = ops.cast(ops.shape(sop_labels)[0], "float32")

    weight_total = ops.sum(weights)
    return {
        "masked_lm_accuracy": (ops.sum(weights * mlm_correct), weight_total),
        "masked_lm_loss": (ops.sum(weights * mlm_losses), weight_total),
        "sentence_order_accuracy": (ops.sum(sop_correct), num_examples),
        "sentence_order_loss": (ops.sum(sop_losses), num_examples),
    }
