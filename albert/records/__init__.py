"""TFRecord files without TensorFlow, shared by pretraining and fine-tuning data.

What belongs here: TFRecord framing with CRC-32C (tfrecord.py), the
`tf.train.Example` wire format (example_proto.py), and the addressable,
resumable record streams the training input reads (streams.py). Nothing here
knows a task or an objective.
"""
