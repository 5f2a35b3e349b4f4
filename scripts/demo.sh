#!/usr/bin/env bash
# `make demo`: ingest the sample conversation into a fresh embedded store and
# run a few searches. Everything stays in .memstack-demo/ in the repo.
set -euo pipefail
cd "$(dirname "$0")/.."
export MEMSTACK_DATA_DIR=.memstack-demo
rm -rf "$MEMSTACK_DATA_DIR"
memstack=.venv/bin/memstack

echo "== ingest examples/conversation.jsonl (30 turns between Maya and her assistant)"
$memstack ingest examples/conversation.jsonl --user maya --session demo --sync
for query in "where does Maya live now" "what should I avoid cooking for her" "which programming languages does she use" "when is the Iceland trip"; do
  echo
  $memstack search "$query" --user maya --k 3
done
echo
echo "== what memstack knows about maya (newest 5)"
$memstack memories --user maya --limit 5
