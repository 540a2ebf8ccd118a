#!/bin/sh
# Fills a fuzzing corpus folder from the committed seeds plus the decompressed snapshot
# fixtures, so the corpus that libFuzzer grows stays out of the source tree.
# Usage: fuzz/make_seeds.sh <build-dir>/corpus   (makes snapshot/, trace/ and scenario/ under it)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: make_seeds.sh CORPUS_DIR}
mkdir -p "$out/snapshot" "$out/trace" "$out/scenario"
cp "$here"/seeds/snapshot/* "$out/snapshot/"
cp "$here"/seeds/trace/* "$out/trace/"
cp "$here"/seeds/scenario/* "$out/scenario/"
for fixture in "$here"/../tests/data/*.pickle.gz; do
  name=$(basename "$fixture" .gz)
  gunzip -c "$fixture" > "$out/snapshot/$name"
done
