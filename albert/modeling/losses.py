"""Pretraining losses and metrics, exactly as the original."""

from keras import ops


def _cross_entropy(logits, labels):
    """-log_softmax(logits)[label] per example.

    The fused sparse cross-entropy equals the original's log_softmax times a
    one-hot label to float32 rounding; picking the label's log-probability
    with a gather instead would make the gradient a scatter into a zero tensor
    the size of all MLM logits.
    """
    return ops.sparse_categorical_crossentropy(ops.cast(labels, "int32"),
                                               ops.cast(logits, "float32"), from_logits=True)


def masked_lm_example_losses(mlm_logits, masked_lm_ids):
    """Cross-entropy per masked position, [B, P]."""
    return _cross_entropy(mlm_logits, masked_lm_ids)


def masked_lm_loss(mlm_logits, masked_lm_ids, masked_lm_weights, total_weight=None):
    """`Σ w · CE / (Σ w + 1e-5)` over all masked positions of the batch.

    `total_weight` is Σ w over the whole global batch when the batch is split
    across replicas (default: this batch's Σ w). Each replica then returns
    its share of the global-batch loss, and the shares add up to exactly it.
    """
    weights = ops.cast(masked_lm_weights, "float32")
    losses = masked_lm_example_losses(mlm_logits, masked_lm_ids)
    if total_weight is None:
        total_weight = ops.sum(weights)
    return ops.sum(weights * losses) / (total_weight + 1e-5)


def sentence_order_loss(sentence_order_logits, sentence_order_labels, num_examples=None):
    """Mean cross-entropy of the 2-way sentence-order head over the (global) batch."""
    labels = ops.reshape(sentence_order_labels, (-1,))
    losses = _cross_entropy(sentence_order_logits, labels)
    if num_examples is None:
        num_examples = ops.cast(ops.shape(losses)[0], "float32")
    return ops.sum(losses) / num_examples


def pretraining_normalizers(features):
    """Denominators of the pretraining losses for this batch (to be summed across replicas)."""
    return {"masked_lm_weight": ops.sum(ops.cast(features["masked_lm_weights"], "float32")),
            "examples": ops.cast(ops.shape(features["next_sentence_labels"])[0], "float32")}


def pretraining_losses(outputs, features, normalizers=None, sentence_objective=True):
    """Losses of one batch: `masked_lm_loss`, `sentence_order_loss` and their sum `loss`.

    `features` holds the pretraining TFRecord features `masked_lm_ids`,
    `masked_lm_weights` and `next_sentence_labels` (the SOP label, named as in
    the original data format). `normalizers`: global sums of
    `pretraining_normalizers` when the batch is split across replicas.
    `sentence_objective=False` leaves the sentence loss out of `loss` (masked
    LM only, the paper's "None" ablation); it is still reported.
    """
    normalizers = normalizers or {}
    mlm = masked_lm_loss(outputs["mlm_logits"], features["masked_lm_ids"],
                         features["masked_lm_weights"], normalizers.get("masked_lm_weight"))
    sop = sentence_order_loss(outputs["sentence_order_logits"], features["next_sentence_labels"],
                              normalizers.get("examples"))
    total = mlm + sop if sentence_objective else mlm
    return {"loss": total, "masked_lm_loss": mlm, "sentence_order_loss": sop}


def pretraining_metric_sums(outputs, features):
    """Numerators and denominators of the evaluation metrics for one batch.

    Returns `{name: (total, count)}`; summing both over batches and dividing
    gives the original's streaming metrics: `masked_lm_accuracy` and
    `masked_lm_loss` weighted by `masked_lm_weights`, `sentence_order_accuracy`
    and `sentence_order_loss` averaged over examples. Rows whose
    `example_weights` (given for padded evaluation batches) are 0 count in
    no sum.
    """
    example_weights = features.get("example_weights")
    if example_weights is None:
        example_weights = ops.ones(ops.shape(features["next_sentence_labels"])[:1], "float32")
    example_weights = ops.cast(ops.reshape(example_weights, (-1,)), "float32")
    weights = ops.cast(features["masked_lm_weights"], "float32") * example_weights[:, None]
    mlm_logits = outputs["mlm_logits"]
    mlm_ids = ops.cast(features["masked_lm_ids"], "int32")
    mlm_correct = ops.cast(ops.equal(ops.cast(ops.argmax(mlm_logits, axis=-1), "int32"), mlm_ids),
                           "float32")
    mlm_losses = masked_lm_example_losses(mlm_logits, mlm_ids)

    sop_logits = outputs["sentence_order_logits"]
    sop_labels = ops.cast(ops.reshape(features["next_sentence_labels"], (-1,)), "int32")
    sop_correct = ops.cast(
        ops.equal(ops.cast(ops.argmax(sop_logits, axis=-1), "int32"), sop_labels), "float32")
    sop_losses = _cross_entropy(sop_logits, sop_labels)
    num_examples = ops.sum(example_weights)

    weight_total = ops.sum(weights)
    predicted_one = ops.cast(ops.equal(ops.argmax(sop_logits, axis=-1), 1), "float32")
    return {
        "masked_lm_accuracy": (ops.sum(weights * mlm_correct), weight_total),
        "masked_lm_loss": (ops.sum(weights * mlm_losses), weight_total),
        "sentence_order_accuracy": (ops.sum(example_weights * sop_correct), num_examples),
        "sentence_order_loss": (ops.sum(example_weights * sop_losses), num_examples),
        # For the one-label check of the training loop's diagnostics.
        "sentence_order_predicted_one": (ops.sum(example_weights * predicted_one), num_examples),
        "sentence_order_label_one": (
            ops.sum(example_weights * ops.cast(sop_labels, "float32")), num_examples),
    }
