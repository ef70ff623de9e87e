"""An independent NumPy transcription of the original forward pass.

It reads weights by their original TF1 names, spelled here from the original's documented layout
rather than taken from the package's name table, so comparing it with the
Keras model checks the layers, the routing and the naming together.
"""

import numpy as np

PREFIX = "bert/encoder/transformer"


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


ACTIVATIONS = {"gelu": gelu, "relu": lambda x: np.maximum(x, 0), "tanh": np.tanh,
               "linear": lambda x: x}


def layer_norm(x, weights, scope):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + 1e-12) * weights[f"{scope}/gamma"] + weights[f"{scope}/beta"]


def dense(x, weights, scope):
    return x @ weights[f"{scope}/kernel"] + weights[f"{scope}/bias"]


def block_scopes(config, layer):
    """(attention scope, attention LayerNorm, FFN scope, FFN LayerNorm) per block application."""
    L, G, K = config.num_hidden_layers, config.num_hidden_groups, config.inner_group_num
    base = f"{PREFIX}/group_0/inner_group_0"
    if config.sharing_strategy == "shared_attention":
        return [(f"{base}/attention_1", f"{base}/LayerNorm",
                 f"{base}/ffn_{layer + 1}", f"{base}/ffn_{layer + 1}/LayerNorm")]
    if config.sharing_strategy == "shared_ffn":
        return [(f"{base}/attention_{layer + 1}", f"{base}/attention_{layer + 1}/LayerNorm",
                 f"{base}/ffn_1", f"{base}/LayerNorm_1")]
    group = int(layer / L * G)
    scopes = []
    for inner in range(K):
        prefix = f"{PREFIX}/group_{group}/inner_group_{inner}"
        scopes.append((f"{prefix}/attention_1", f"{prefix}/LayerNorm",
                       f"{prefix}/ffn_1", f"{prefix}/LayerNorm_1"))
    return scopes


def attention(x, bias, weights, scope, layer_norm_scope, num_heads):
    batch, length, hidden = x.shape
    head = hidden // num_heads

    def heads(name):
        projected = dense(x, weights, f"{scope}/self/{name}")
        return projected.reshape(batch, length, num_heads, head).transpose(0, 2, 1, 3)

    q, k, v = heads("query"), heads("key"), heads("value")
    scores = q @ k.transpose(0, 1, 3, 2) * (1.0 / np.sqrt(head)) + bias
    scores = scores - scores.max(-1, keepdims=True)
    probabilities = np.exp(scores)
    probabilities /= probabilities.sum(-1, keepdims=True)
    context = (probabilities @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
    output = dense(context, weights, f"{scope}/output/dense")
    return layer_norm(output + x, weights, layer_norm_scope)


def feed_forward(x, weights, scope, layer_norm_scope, activation):
    inner = activation(dense(x, weights, f"{scope}/intermediate/dense"))
    output = dense(inner, weights, f"{scope}/intermediate/output/dense")
    return layer_norm(output + x, weights, layer_norm_scope)


def encoder(weights, config, ids, mask, type_ids):
    weights = {name: np.asarray(value, np.float64) for name, value in weights.items()}
    length = ids.shape[1]
    x = (weights["bert/embeddings/word_embeddings"][ids]
         + weights["bert/embeddings/token_type_embeddings"][type_ids]
         + weights["bert/embeddings/position_embeddings"][:length][None])
    x = layer_norm(x, weights, "bert/embeddings/LayerNorm")
    if config.embedding_size != config.hidden_size:
        x = dense(x, weights, "bert/encoder/embedding_hidden_mapping_in")
    bias = ((1.0 - mask.astype(np.float64)) * -10000.0)[:, None, None, :]
    activation = ACTIVATIONS[config.activation]
    layers = []
    for layer in range(config.num_hidden_layers):
        for att, att_norm, ffn, ffn_norm in block_scopes(config, layer):
            x = attention(x, bias, weights, att, att_norm, config.num_attention_heads)
            x = feed_forward(x, weights, ffn, ffn_norm, activation)
            layers.append(x)
    pooled = np.tanh(dense(x[:, 0], weights, "bert/pooler/dense"))
    return {"sequence_output": x, "pooled_output": pooled, "encoder_outputs": layers}


def pretrainer(weights, config, inputs):
    outputs = encoder(weights, config, inputs["input_word_ids"], inputs["input_mask"],
                      inputs["input_type_ids"])
    weights = {name: np.asarray(value, np.float64) for name, value in weights.items()}
    positions = inputs["masked_lm_positions"]
    states = np.take_along_axis(outputs["sequence_output"], positions[:, :, None], axis=1)
    states = ACTIVATIONS[config.activation](dense(states, weights, "cls/predictions/transform/dense"))
    states = layer_norm(states, weights, "cls/predictions/transform/LayerNorm")
    outputs["mlm_logits"] = (states @ weights["bert/embeddings/word_embeddings"].T
                             + weights["cls/predictions/output_bias"])
    outputs["sentence_order_logits"] = (outputs["pooled_output"]
                                        @ weights["cls/seq_relationship/output_weights"].T
                                        + weights["cls/seq_relationship/output_bias"])
    return outputs
