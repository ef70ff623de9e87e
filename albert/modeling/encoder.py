"""The ALBERT encoder: embeddings, factorised projection, shared blocks, pooler."""

import functools

import keras
from keras import ops

from albert.config import load_config
from albert.errors import InputError
from albert.modeling.configured_model import ConfiguredModel
from albert.modeling.attention import AlbertAttention, attention_bias_from_mask
from albert.modeling.block_loop import apply_in_loop
from albert.modeling.dropout import DROPOUT_SEEDS, call_seeds, derive_seeds
from albert.modeling.embeddings import AlbertEmbeddings
from albert.modeling.feed_forward import AlbertFeedForward
from albert.modeling.sharing import sharing_plan

INPUT_KEYS = ("input_word_ids", "input_mask", "input_type_ids")
# A training call loops over the shared block's applications when the partial gradients the
# unrolled graph would form beside the summed one (the block's float32 size times layers − 1)
# reach this: ALBERT-xlarge (4.6 GB) and xxlarge (8.9 GB) loop; base (0.3 GB), large (1.2 GB)
# and the small models of the paper's CPU-scale tables do not.
LOOP_FROM_PARTIAL_GRADIENT_BYTES = 2 * 2**30
__all__ = ["AlbertEncoder", "DROPOUT_SEEDS", "INPUT_KEYS", "loops_shared_block"]


def loops_shared_block(config) -> bool:
    """Whether this config's training calls run in the shared-block loop (on TensorFlow): one
    attention block and one feed-forward block for every application, and partial gradients of
    at least `LOOP_FROM_PARTIAL_GRADIENT_BYTES`. Read from the config alone, so that the memory
    planner counts what the step keeps."""
    config = load_config(config)
    schedule = sharing_plan(config).schedule
    if len(schedule) < 2 or len(set(schedule)) != 1:
        return False
    h, i = config.hidden_size, config.intermediate_size
    layer_norm = 2 * h
    attention = 4 * (h * h + h) + layer_norm
    feed_forward = h * i + i + i * h + h + layer_norm
    return (attention + feed_forward) * 4 * (len(schedule) - 1) >= LOOP_FROM_PARTIAL_GRADIENT_BYTES


@keras.saving.register_keras_serializable(package="albert")
class AlbertEncoder(ConfiguredModel):
    """ALBERT backbone, configured by one `AlbertConfig`.

    The forward pass, top to bottom: embeddings at width E; a linear E -> H
    projection (`embedding_hidden_mapping_in`, only when E != H); `L * K`
    post-LayerNorm blocks whose attention and FFN sub-blocks are chosen by the
    config's sharing plan (groups / inner groups, or the paper's
    shared-attention / shared-FFN); a tanh pooler on token 0.

    Inputs (TF-Hub TF2 convention): a dict of int32 `[B, S]` tensors
    `input_word_ids`, `input_mask` (1 = real token; default all ones) and
    `input_type_ids` (default all zeros). In training, `dropout_seeds` (int32
    `[B]`) makes each example's dropout masks a function of its seed alone;
    the training loop supplies it. Without it, seeds are drawn from the
    model's own seed generator.

    Outputs: a dict with `sequence_output` `[B, S, H]`, `pooled_output`
    `[B, H]` and `encoder_outputs`, the list of all `L * K` block outputs.
    With `pooled_only=True` (inference for a head on the pooled output):
    `pooled_output` alone. The pooler reads token 0 only, so the last block
    then computes token 0's output alone (its keys and values still come from
    every token). That is the same arithmetic for that token with less
    work: the last block's query, output and feed-forward matmuls run on 1
    position instead of S. It is inference only: with `training=True` it is
    an error. With `with_embedding_output=True` the dict also holds
    `embedding_output` `[B, S, H]`, what the first block reads (the
    embeddings after the E -> H projection): with `encoder_outputs`, every
    block application's input and output (the paper's Figure 1).

    Setting `rematerialize = True` (a training setting, not part of the
    config; `--rematerialize`) recomputes each block application's
    activations in the backward pass instead of storing them: the stored
    activations shrink to one `[B, S, H]` tensor per application.
    The dropout masks are functions of the example seeds, so the recomputed
    pass is the stored one exactly and the gradients do not change.

    Training memory of shared blocks: when one attention block and one FFN block run every
    application (all-shared, one group of one inner group) and the block is large
    (`LOOP_FROM_PARTIAL_GRADIENT_BYTES`: ALBERT-xlarge and xxlarge), a training call runs the
    applications in a `tf.while_loop` with a backward pass of its own
    (`albert.modeling.block_loop`): one gradient sum of the shared block, started from the last
    application's gradient, where the unrolled graph makes one partial gradient per application
    with several alive at once; the forward pass keeps each application's input and its dense
    projections' outputs, and the backward pass replays them (or, with `rematerialize`,
    recomputes them). The arithmetic is the same; only the order of the sum's additions differs
    (float rounding). Elsewhere, `rematerialize` wraps each unrolled application in
    `keras.remat`. `loop_shared_applications = False` always unrolls, as inference calls do.

    Args:
      config: an `AlbertConfig`, a dict of its JSON keys, or a JSON file path.

    Example:
        encoder = AlbertEncoder(AlbertConfig.from_json_file("configs/albert_base_v2.json"))
        outputs = encoder({"input_word_ids": ids, "input_mask": mask,
                           "input_type_ids": type_ids})
    """

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        config = load_config(config)
        self.albert_config = config
        plan = sharing_plan(config)
        self._schedule = plan.schedule
        initializer_range = config.initializer_range

        self.embeddings = AlbertEmbeddings(
            vocab_size=config.vocab_size,
            embedding_size=config.embedding_size,
            max_position_embeddings=config.max_position_embeddings,
            type_vocab_size=config.type_vocab_size,
            dropout_rate=config.hidden_dropout_prob,
            initializer_range=initializer_range,
            dtype=self.dtype_policy,
            name="embeddings")
        if config.embedding_size != config.hidden_size:
            self.embedding_projection = keras.layers.Dense(
                config.hidden_size,
                kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
                dtype=self.dtype_policy,
                name="embedding_hidden_mapping_in")
        else:
            # As in the original, E == H means no projection variables at all.
            self.embedding_projection = None
        self.attention_blocks = [
            AlbertAttention(
                hidden_size=config.hidden_size,
                num_attention_heads=config.num_attention_heads,
                attention_dropout_rate=config.attention_probs_dropout_prob,
                output_dropout_rate=config.hidden_dropout_prob,
                initializer_range=initializer_range,
                dtype=self.dtype_policy,
                name=f"attention_{index}")
            for index in range(len(plan.attention))
        ]
        self.ffn_blocks = [
            AlbertFeedForward(
                hidden_size=config.hidden_size,
                intermediate_size=config.intermediate_size,
                activation=config.hidden_act,
                dropout_rate=config.hidden_dropout_prob,
                initializer_range=initializer_range,
                dtype=self.dtype_policy,
                name=f"ffn_{index}")
            for index in range(len(plan.ffn))
        ]
        self.pooler = keras.layers.Dense(
            config.hidden_size,
            activation="tanh",
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy,
            name="pooler")
        self.uses_dropout = max(config.hidden_dropout_prob, config.attention_probs_dropout_prob) > 0
        self.rematerialize = False
        self.loop_shared_applications = True
        # Only for training calls that bring no seeds of their own.
        self.seed_generator = (keras.random.SeedGenerator()
                               if self.uses_dropout else None)
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        config = self.albert_config
        self.embeddings.build()
        if self.embedding_projection is not None:
            self.embedding_projection.build((None, None, config.embedding_size))
        for block in self.attention_blocks + self.ffn_blocks:
            block.build()
        self.pooler.build((None, config.hidden_size))
        self.built = True

    def call(self, inputs, training=False, pooled_only=False, with_embedding_output=False):
        if not isinstance(inputs, dict) or "input_word_ids" not in inputs:
            raise InputError(
                "AlbertEncoder expects a dict with 'input_word_ids' (and optionally "
                "'input_mask', 'input_type_ids')")
        if pooled_only and training:
            # Dropout sites would draw different masks on token 0's shortened path.
            raise InputError("pooled_only=True is for inference; call with training=False")
        word_ids = inputs["input_word_ids"]
        input_mask = inputs.get("input_mask")
        if input_mask is None:
            input_mask = ops.ones_like(word_ids)
        type_ids = inputs.get("input_type_ids")
        if type_ids is None:
            type_ids = ops.zeros_like(word_ids)

        seeds = self.dropout_seeds(inputs, training)

        def site_seeds(site):
            return None if seeds is None else derive_seeds(seeds, site)

        hidden_states = self.embeddings(word_ids, type_ids, training=training,
                                        dropout_seeds=site_seeds(0))
        if self.embedding_projection is not None:
            hidden_states = self.embedding_projection(hidden_states)
        embedding_output = hidden_states
        attention_bias = attention_bias_from_mask(input_mask, hidden_states.dtype)

        def apply_block(states, application, attention_index, ffn_index, query_states=None):
            states = self.attention_blocks[attention_index](
                states, attention_bias, training=training,
                dropout_seeds=site_seeds(2 * application + 1), query_states=query_states)
            return self.ffn_blocks[ffn_index](
                states, training=training, dropout_seeds=site_seeds(2 * application + 2))

        encoder_outputs = []
        last = len(self._schedule) - 1
        if self._runs_in_loop(training):
            hidden_states, encoder_outputs = self._apply_in_loop(hidden_states, apply_block)
        # Shared blocks run several times: each application gets its own sites.
        for application, (attention_index, ffn_index) in enumerate(
                [] if encoder_outputs else self._schedule):
            if self.rematerialize and training:
                hidden_states = keras.remat(functools.partial(
                    apply_block, application=application, attention_index=attention_index,
                    ffn_index=ffn_index))(hidden_states)
            else:
                # Only token 0 of the last block reaches the pooler.
                query_states = hidden_states[:, :1, :] if pooled_only and application == last \
                    else None
                hidden_states = apply_block(hidden_states, application, attention_index,
                                            ffn_index, query_states)
            encoder_outputs.append(hidden_states)

        pooled_output = self.pooler(hidden_states[:, 0, :])
        if pooled_only:
            return {"pooled_output": pooled_output}
        outputs = {
            "sequence_output": hidden_states,
            "pooled_output": pooled_output,
            "encoder_outputs": encoder_outputs,
        }
        if with_embedding_output:
            outputs["embedding_output"] = embedding_output
        return outputs

    def _runs_in_loop(self, training) -> bool:
        """Whether this call runs its block applications in the shared-block loop (see the
        class): only where the partial gradients it avoids are large. At small widths the loop's
        own cost shows (the demo's model: 1.22x slower a step); at xxlarge it saves gigabytes."""
        return (training and self.loop_shared_applications
                and keras.backend.backend() == "tensorflow"
                and loops_shared_block(self.albert_config))

    def _apply_in_loop(self, hidden_states, apply_block):
        """Every application of the one shared block pair in the shared-block loop
        (`albert.modeling.block_loop`); returns the last output and the list of every
        application's output."""
        attention_index, ffn_index = self._schedule[0]
        outputs = apply_in_loop(
            hidden_states, len(self._schedule),
            lambda states, application: apply_block(states, application, attention_index,
                                                    ffn_index),
            recompute=self.rematerialize)
        return outputs[-1], outputs

    def dropout_seeds(self, inputs, training):
        """Per-example seeds for this call's dropout: the input's, or drawn; None without dropout."""
        if not training or not self.uses_dropout:
            return None
        return call_seeds(inputs, ops.shape(inputs["input_word_ids"])[0], self.seed_generator)

    def get_embedding_table(self):
        """The `[V, E]` word-embedding variable (also the tied MLM decoder)."""
        return self.embeddings.word_embeddings.embeddings


def set_rematerialization(model, enabled: bool = True) -> int:
    """Sets `rematerialize` on every `AlbertEncoder` inside `model`; returns how many."""
    encoders = [layer for layer in model._flatten_layers(include_self=True, recursive=True)
                if isinstance(layer, AlbertEncoder)]
    for encoder in encoders:
        encoder.rematerialize = enabled
    return len(encoders)
