"""SQuAD heads: v1.1 (start / end logits) and v2.0 (XLNet-style start, end given start, answerability).

Both keep the original's variable names (tabled in
`albert.checkpoints.naming.HEADS`: `squad_v1`, `squad_v2`), so fine-tuned
checkpoints move between the original code and ours.
"""

import keras
from keras import ops

from albert.config import load_config
from albert.modeling.configured_model import EncoderWithHead
from albert.modeling.dropout import SeededDropout
from albert.modeling.encoder import AlbertEncoder
# What the original adds to masked positions before the softmax.
_MASKED = 1e30


@keras.saving.register_keras_serializable(package="albert")
class SquadV1Head(keras.layers.Layer):
    """`logits = h · output_weightsᵀ + output_bias` per position → start and end logits.

    `output_weights [2, H]` (truncated normal, stddev 0.02) and
    `output_bias [2]` under `cls/squad/`; no dropout, as the original.
    """

    def __init__(self, hidden_size, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size

    def build(self, input_shape=None):
        if self.built:
            return
        self.output_weights = self.add_weight(
            shape=(2, self.hidden_size),
            initializer=keras.initializers.TruncatedNormal(stddev=0.02), name="output_weights")
        self.output_bias = self.add_weight(shape=(2,), initializer="zeros", name="output_bias")
        self.built = True

    def call(self, sequence_output):
        weights = ops.cast(self.output_weights, sequence_output.dtype)
        logits = ops.einsum("bsh,oh->obs", sequence_output, weights)
        logits = ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")[:, None, None]
        return logits[0], logits[1]

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size)
        return config


def _masked(logits, p_mask):
    """The original's masking: `logits·(1 − p_mask) − 1e30·p_mask`."""
    return logits * (1.0 - p_mask) - _MASKED * p_mask


@keras.saving.register_keras_serializable(package="albert")
class SquadV2Head(keras.layers.Layer):
    """The original v2.0 head (from XLNet): start, end conditioned on the start, answerability.

    - start: `start_logits/dense` (H→1) → masked by `p_mask` → log-softmax;
    - end: every position's state concatenated with the start's state →
      `end_logits/dense_0` (2H→H, tanh) → `end_logits/LayerNorm` (ε 1e-12) →
      `end_logits/dense_1` (H→1) → masked → log-softmax. In training the start
      is the gold one; at inference the `start_n_top` best starts each give
      their `end_n_top` best ends (entry `i·end_n_top + j`: the j-th end of the
      i-th start);
    - answerability: the start-probability-weighted state and the `[CLS]`
      state → `answer_class/dense_0` (2H→H, tanh) → dropout →
      `answer_class/dense_1` (H→1, no bias) → `cls_logits` (a logit for "no answer").

    Kernels start from a truncated normal with the config's `initializer_range`.
    """

    def __init__(self, hidden_size, initializer_range=0.02, start_n_top=5, end_n_top=5,
                 dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        self.dropout_rate = dropout_rate

        def dense(units, name, activation=None, use_bias=True):
            return keras.layers.Dense(
                units, activation=activation, use_bias=use_bias, name=name,
                kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
                dtype=self.dtype_policy)

        self.start_dense = dense(1, "start_dense")
        self.end_dense_0 = dense(hidden_size, "end_dense_0", activation="tanh")
        self.end_layer_norm = keras.layers.LayerNormalization(epsilon=1e-12, name="end_layer_norm",
                                                              dtype=self.dtype_policy)
        self.end_dense_1 = dense(1, "end_dense_1")
        self.answer_dense_0 = dense(hidden_size, "answer_dense_0", activation="tanh")
        self.answer_dense_1 = dense(1, "answer_dense_1", use_bias=False)
        self.dropout = SeededDropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        if self.built:
            return
        hidden = self.hidden_size
        self.start_dense.build((None, None, hidden))
        self.end_dense_0.build((None, None, 2 * hidden))
        self.end_layer_norm.build((None, None, hidden))
        self.end_dense_1.build((None, None, hidden))
        self.answer_dense_0.build((None, 2 * hidden))
        self.answer_dense_1.build((None, hidden))
        self.built = True

    def _end_log_probs(self, sequence_output, start_states, p_mask):
        """End log-probabilities `[B, K, S]` for start states `[B, K, H]`."""
        length = ops.shape(sequence_output)[1]
        k = ops.shape(start_states)[1]
        states = ops.broadcast_to(sequence_output[:, None], (ops.shape(sequence_output)[0], k,
                                                              length, self.hidden_size))
        starts = ops.broadcast_to(start_states[:, :, None], ops.shape(states))
        hidden = self.end_dense_0(ops.concatenate([states, starts], axis=-1))
        logits = ops.squeeze(self.end_dense_1(self.end_layer_norm(hidden)), -1)
        logits = _masked(ops.cast(logits, "float32"), p_mask[:, None])
        return ops.log_softmax(logits, axis=-1)

    def call(self, sequence_output, p_mask, start_positions=None, training=False,
             dropout_seeds=None):
        p_mask = ops.cast(p_mask, "float32")
        start_logits = ops.cast(ops.squeeze(self.start_dense(sequence_output), -1), "float32")
        start_masked = _masked(start_logits, p_mask)
        start_log_probs = ops.log_softmax(start_masked, axis=-1)
        outputs = {"start_log_probs": start_log_probs}
        if start_positions is not None:
            index = ops.reshape(ops.cast(start_positions, "int32"), (-1, 1, 1))
            start_states = ops.take_along_axis(sequence_output, index, axis=1)  # [B, 1, H]
            outputs["end_log_probs"] = self._end_log_probs(sequence_output, start_states,
                                                           p_mask)[:, 0]
        else:
            start_top_log_probs, start_top_index = ops.top_k(start_log_probs, self.start_n_top)
            start_states = ops.take_along_axis(sequence_output, start_top_index[..., None],
                                               axis=1)  # [B, K, H]
            end_log_probs = self._end_log_probs(sequence_output, start_states, p_mask)
            end_top_log_probs, end_top_index = ops.top_k(end_log_probs, self.end_n_top)
            batch = ops.shape(sequence_output)[0]
            outputs.update(
                start_top_log_probs=start_top_log_probs, start_top_index=start_top_index,
                end_top_log_probs=ops.reshape(end_top_log_probs,
                                              (batch, self.start_n_top * self.end_n_top)),
                end_top_index=ops.reshape(end_top_index,
                                          (batch, self.start_n_top * self.end_n_top)))
        # Answerability from the expected start state and the [CLS] state.
        start_probabilities = ops.softmax(start_masked, axis=-1)
        start_feature = ops.einsum("bs,bsh->bh", ops.cast(start_probabilities,
                                                          sequence_output.dtype), sequence_output)
        answer = self.answer_dense_0(ops.concatenate([start_feature, sequence_output[:, 0]],
                                                     axis=-1))
        answer = self.dropout(answer, seeds=dropout_seeds, training=training)
        outputs["cls_logits"] = ops.cast(ops.squeeze(self.answer_dense_1(answer), -1), "float32")
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, initializer_range=self.initializer_range,
                      start_n_top=self.start_n_top, end_n_top=self.end_n_top,
                      dropout_rate=self.dropout_rate)
        return config


@keras.saving.register_keras_serializable(package="albert")
class AlbertSquadV1(EncoderWithHead):
    """ALBERT with the original SQuAD v1.1 head.

    Inputs: the encoder's dict. Outputs: `start_logits`, `end_logits` `[B, S]`
    (float32; the raw logits, which the original's prediction files call
    `start_log_prob` / `end_log_prob`) and the encoder's outputs.

    Example:
        model = AlbertSquadV1(config)
        start = model(features)["start_logits"]
    """

    head_name = "squad_v1"

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.albert_config = load_config(config)
        self.encoder = AlbertEncoder(self.albert_config, dtype=self.dtype_policy, name="encoder")
        self.head = SquadV1Head(self.albert_config.hidden_size, dtype=self.dtype_policy,
                                name="squad")
        self.build()

    def call(self, inputs, training=False):
        outputs = dict(self.encoder(inputs, training=training))
        outputs["start_logits"], outputs["end_logits"] = self.head(outputs["sequence_output"])
        return outputs


@keras.saving.register_keras_serializable(package="albert")
class AlbertSquadV2(EncoderWithHead):
    """ALBERT with the original SQuAD v2.0 head (`SquadV2Head`).

    Inputs: the encoder's dict plus `p_mask` `[B, S]` (1 where no answer can
    be), and in training `start_positions` `[B]` (the gold starts the end is
    conditioned on). Outputs: `start_log_probs`, `cls_logits`, and in
    training `end_log_probs`, at inference `start_top_log_probs`,
    `start_top_index` `[B, start_n_top]`, `end_top_log_probs`,
    `end_top_index` `[B, start_n_top·end_n_top]`.

    Args:
      config: an `AlbertConfig`, a dict of its JSON keys, or a JSON file path.
      start_n_top, end_n_top: the inference beam (the original: 5 and 5).
      dropout_rate: dropout in the answerability layer (`--dropout_prob`, 0.1).
    """

    head_name = "squad_v2"

    def __init__(self, config, start_n_top=5, end_n_top=5, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.albert_config = load_config(config)
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        self.dropout_rate = dropout_rate
        self.encoder = AlbertEncoder(self.albert_config, dtype=self.dtype_policy, name="encoder")
        self.head = SquadV2Head(self.albert_config.hidden_size,
                                self.albert_config.initializer_range, start_n_top, end_n_top,
                                dropout_rate, dtype=self.dtype_policy, name="squad_v2")
        self.seed_generator = keras.random.SeedGenerator() if dropout_rate > 0 else None
        self.build()

    def call(self, inputs, training=False):
        outputs = dict(self.encoder(inputs, training=training))
        outputs.update(self.head(
            outputs["sequence_output"], inputs["p_mask"],
            start_positions=inputs.get("start_positions") if training else None,
            training=training,
            dropout_seeds=self.head_dropout_seeds(inputs, training, self.dropout_rate)))
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(start_n_top=self.start_n_top, end_n_top=self.end_n_top,
                      dropout_rate=self.dropout_rate)
        return config
