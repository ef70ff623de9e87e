"""Pretraining data: from raw text to the records `run_pretraining.py` reads, and back.

What belongs here: reading a corpus (corpus.py), the tokenized corpus on disk
(token_store.py), building instances with the original's sentence packing and
sentence-order / next-sentence pairs (instances.py), masking (masking.py),
their `tf.train.Example` bytes (instance_encoding.py), the global record
shuffle (record_shuffle.py), `create_pretraining_data.py`'s three passes
(creation.py), the record schema and data contract (schema.py), and the
training side's parsing and on-the-fly masking (inputs.py).

Fine-tuning readers live in `albert.finetuning_data`; record framing and
streams shared by both in `albert.records`.
"""
