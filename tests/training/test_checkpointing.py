import numpy as np
import tensorflow as tf

from albert.checkpoints import model_variables, read_checkpoint
from albert.modeling import AlbertPretrainer
from albert.training.checkpointing import TrainingCheckpoints, training_variables
from albert.training.optimization import create_optimizer
from conftest import tiny_config


def _model_and_optimizer(seed=0):
    import keras

    keras.utils.set_random_seed(seed)
    model = AlbertPretrainer(tiny_config(hidden_dropout_prob=0.1))
    optimizer = create_optimizer("lamb", 0.01, 100, 10, variable_names={
        v.path: n for n, v in model_variables(model).items()})
    optimizer.build(model.trainable_variables)
    return model, optimizer


def test_checkpoint_holds_the_original_layout_and_restores_everything(tmp_path):
    model, optimizer = _model_and_optimizer()
    for variable in optimizer.variables:
        variable.assign(np.full(variable.shape, 0.5, variable.dtype) if variable.shape else 7)
    dataset = tf.data.Dataset.range(100).shuffle(10, seed=1)
    iterator = iter(dataset)
    for _ in range(5):
        next(iterator)
    checkpoints = TrainingCheckpoints(str(tmp_path))
    checkpoints.save_input_state(7, iterator)
    checkpoints.save(7, model, optimizer)
    expected_next = [int(next(iterator)) for _ in range(5)]

    stored = tf.train.load_checkpoint(str(tmp_path / "model.ckpt-7")).get_variable_to_shape_map()
    canonical = set(model_variables(model))
    assert canonical <= set(stored)
    assert {f"{name}/adam_m" for name in canonical} <= set(stored)
    assert {f"{name}/adam_v" for name in canonical} <= set(stored)
    assert "global_step" in stored
    # Dropout random-generator states are training state, kept apart from model names.
    assert any(name.startswith("training_state/model/") for name in stored)
    # The weights read like any original checkpoint (slots, step, state skipped).
    weights, _ = read_checkpoint(str(tmp_path), "tf1", tiny_config(hidden_dropout_prob=0.1))
    assert set(weights) == canonical

    fresh_model, fresh_optimizer = _model_and_optimizer(seed=1)
    fresh_iterator = iter(dataset)
    checkpoints.restore(7, fresh_model, fresh_optimizer, fresh_iterator)
    for name, variables in training_variables(model, optimizer).items():
        restored = training_variables(fresh_model, fresh_optimizer)[name]
        np.testing.assert_array_equal(np.asarray(restored.numpy()), np.asarray(variables.numpy()),
                                      err_msg=name)
    assert [int(next(fresh_iterator)) for _ in range(5)] == expected_next


def test_old_checkpoints_are_pruned_and_best_is_kept(tmp_path):
    model, optimizer = _model_and_optimizer()
    checkpoints = TrainingCheckpoints(str(tmp_path), keep_checkpoint_max=2)
    iterator = iter(tf.data.Dataset.range(10))
    for step in (10, 20, 30):
        checkpoints.save_input_state(step, iterator)
        checkpoints.save(step, model, optimizer)
        if step == 10:
            checkpoints.copy_to_best(10)
    assert checkpoints.steps() == [20, 30]
    files = sorted(p.name for p in tmp_path.iterdir())
    assert not [f for f in files if f.startswith("model.ckpt-10") or f.startswith("input_state-10")]
    assert "model.ckpt-best.index" in files
    assert not [f for f in files if f.startswith(".tmp")]
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-30")
