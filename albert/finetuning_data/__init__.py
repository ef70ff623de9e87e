"""Fine-tuning data: the task readers and feature converters of the fine-tuning scripts.

What belongs here: GLUE processors and features (glue.py), RACE reading and
features (race.py), SQuAD v1.1 / v2.0 reading, character alignment, windows
and feature files (squad.py), and the feature caches they write, checked by
their settings before reuse (feature_cache.py). A new task's reader goes here.

Pretraining data creation lives in `albert.pretraining_data`; record framing
and streams shared by both in `albert.records`.
"""
