"""Arithmetic of a pretraining step, to carry a measured CPU budget to other hardware.

Counts the floating-point operations of the matrix products (a multiply-add
is 2 operations), which are nearly all of an ALBERT step's arithmetic; the
element-wise work (softmax, GELU, layer norm, the optimizer) is left out.
Sharing changes the parameter count, not the arithmetic: a block shared
by 12 layers is computed 12 times. Training costs about three forward
passes (the backward pass computes gradients for both the activations and
the weights).
"""

import dataclasses

from albert.config import AlbertConfig

TRAINING_PASSES = 3  # forward + backward (activation and weight gradients)


@dataclasses.dataclass(frozen=True)
class StepFlops:
    encoder: int  # token types, embedding projection, every block application, attention products
    heads: int  # pooler, sentence head, masked-LM head at the masked positions
    forward: int
    training: int


def forward_flops(config: AlbertConfig, batch_size: int, seq_length: int,
                  predictions_per_seq: int) -> StepFlops:
    """Matrix-product FLOPs of one pretraining batch (forward, and training = 3 × forward)."""
    hidden, inner = config.hidden_size, config.intermediate_size
    tokens = batch_size * seq_length
    applications = config.num_hidden_layers * config.inner_group_num
    # Token types are embedded as a one-hot product with their table, as in the original.
    per_token = 2 * config.type_vocab_size * config.embedding_size
    if config.embedding_size != hidden:
        per_token += 2 * config.embedding_size * hidden
    per_block = (2 * 4 * hidden * hidden  # query, key, value, output projections
                 + 2 * 2 * hidden * inner  # feed-forward in and out
                 + 2 * 2 * seq_length * hidden)  # scores (Q K^T) and the weighted sum of V
    encoder = tokens * (per_token + applications * per_block)
    heads = (batch_size * (2 * hidden * hidden + 2 * hidden * 2)  # pooler, 2-way sentence head
             + batch_size * predictions_per_seq
             * (2 * hidden * config.embedding_size + 2 * config.embedding_size
                * config.vocab_size))  # masked-LM transform and the tied decoder
    forward = encoder + heads
    return StepFlops(encoder=encoder, heads=heads, forward=forward,
                     training=TRAINING_PASSES * forward)
