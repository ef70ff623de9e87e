"""The FLOP count of a pretraining step agrees with TensorFlow's own count of the model's graph."""

import pytest
import tensorflow as tf
from tensorflow.python.framework import ops as framework_ops
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

from albert.config import AlbertConfig
from albert.modeling import AlbertPretrainer
from albert.paper.flops import forward_flops


def _graph_matmul_flops(model, batch_size, seq_length, predictions):
    spec = {name: tf.TensorSpec([batch_size, seq_length], tf.int32)
            for name in ("input_word_ids", "input_mask", "input_type_ids")}
    spec["masked_lm_positions"] = tf.TensorSpec([batch_size, predictions], tf.int32)
    function = tf.function(lambda inputs: model(inputs, training=False))
    graph = convert_variables_to_constants_v2(function.get_concrete_function(spec)).graph
    return sum(framework_ops.get_stats_for_node_def(graph, op.node_def, "flops").value
               for op in graph.get_operations() if op.type in ("MatMul", "BatchMatMulV2"))


@pytest.mark.parametrize("embedding_size,inner_group_num", [(16, 1), (32, 2)])
def test_forward_flops_match_the_graphs_matrix_products(embedding_size, inner_group_num):
    config = AlbertConfig.from_dict({
        "vocab_size": 500, "embedding_size": embedding_size, "hidden_size": 32,
        "num_hidden_layers": 3, "num_attention_heads": 4, "intermediate_size": 64,
        "inner_group_num": inner_group_num, "max_position_embeddings": 16})
    batch_size, seq_length, predictions = 2, 16, 3
    counted = forward_flops(config, batch_size, seq_length, predictions)
    assert counted.forward == _graph_matmul_flops(AlbertPretrainer(config), batch_size,
                                                  seq_length, predictions)
    assert counted.training == 3 * counted.forward
