"""Held-out evaluation on the strategy's replicas: padded static batches, traced once per run."""

import numpy as np
import pytest
import tensorflow as tf

from albert.config import AlbertConfig
from albert.pretraining_data.schema import load_data_contract
from albert.tasks.pretraining import PretrainingTask
from albert.training.inputs import evaluation_dataset

TINY = AlbertConfig(vocab_size=1200, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
BATCH, MAX_BATCHES = 24, 4


class _Settings:
    eval_batch_size = BATCH
    max_eval_steps = MAX_BATCHES
    jit_compile = False


def _unpadded_metrics(task, model, max_batches):
    """The evaluation as it was: unpadded batches (the last one partial) on one device."""
    totals = {}
    for batch in evaluation_dataset(task.eval_input(), BATCH, max_batches):
        for name, (total, count) in task.metric_sums(model(batch, training=False), batch).items():
            entry = totals.setdefault(name, [0.0, 0.0])
            entry[0] += float(total)
            entry[1] += float(count)
    return {name: total / count for name, (total, count) in totals.items()}


@pytest.fixture(scope="module")
def task_and_model(synthetic_records):
    files, _ = synthetic_records
    # A held-out file whose records do not fill the last batch.
    contract = load_data_contract(files[:1])
    task = PretrainingTask(config=TINY, train_data=contract, eval_data=contract)
    model = task.build_model()
    return task, model


def _last_batch_is_partial(task):
    sizes = [int(tf.shape(batch["masked_lm_ids"])[0]) for batch in
             evaluation_dataset(task.eval_input(), BATCH, 10 ** 6)]
    return sizes[-1] < BATCH


# Slow tier (27 s with one replica, most of a minute with two on 2 cores), to keep the default
# suite within 15 minutes.
@pytest.mark.slow
@pytest.mark.parametrize("replicas", [1, 2])
def test_padded_evaluation_on_the_replicas_equals_the_unpadded_one(task_and_model, replicas):
    task, model = task_and_model
    cpus = [device.name for device in tf.config.list_logical_devices("CPU")][:replicas]
    strategy = (tf.distribute.OneDeviceStrategy(cpus[0]) if replicas == 1
                else tf.distribute.MirroredStrategy(cpus))
    settings = _Settings()
    settings.max_eval_steps = 10 ** 6   # the whole file: its last batch is partial
    assert _last_batch_is_partial(task)
    for settings in (settings, _Settings()):
        expected = _unpadded_metrics(task, model, settings.max_eval_steps)
        # Beside the sums' means, the original's `loss`: the training objective.
        expected["loss"] = expected["masked_lm_loss"] + expected["sentence_order_loss"]
        actual = task.evaluate(model, settings, strategy)
        assert set(actual) == set(expected)
        for name in expected:
            assert actual[name] == pytest.approx(expected[name], rel=1e-6, abs=1e-7), name


def test_two_evaluations_trace_the_step_once(task_and_model):
    task, model = task_and_model
    cpus = [device.name for device in tf.config.list_logical_devices("CPU")][:2]
    strategy = tf.distribute.MirroredStrategy(cpus)
    first = task.evaluate(model, _Settings(), strategy)
    traces = task._metric_sums_evaluation.traces
    assert 1 <= traces <= strategy.num_replicas_in_sync   # MirroredStrategy traces per replica
    # New weights between the evaluations, as after the next checkpoint.
    for variable in model.trainable_variables[:3]:
        variable.assign(variable * 0.5)
    second = task.evaluate(model, _Settings(), strategy)
    assert first != second
    assert task._metric_sums_evaluation.traces == traces   # nothing traced again
    assert np.isfinite(list(second.values())).all()
