#!/bin/sh
# The command that wrote speed.json and speed.md here (cd to the repository first; it refuses
# to overwrite them). It ran on a 2-core machine whose one other job, a training run, was
# stopped for the 23.0 minutes it took, so that every measurement had both cores and the
# memory; speed.log is its output.
set -e
python -m albert.paper speed --models=bert-base,bert-large,albert-base,albert-large,albert-xlarge,albert-xxlarge --batch_size=8 --seq_length=64 --max_predictions_per_seq=10 --warmup_steps=1 --steps=3 --workers=1,2 --output=docs/paper/cpu-table2-speed/speed.json
