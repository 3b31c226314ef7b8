#!/usr/bin/env bash
# session 22 call 4 (one H100, the card issue 27's figures were first measured on): the issue-27 LV A/B of the tree
# of call 3 (edf5c47) against a34b4a8 (.dev22/prev), three rounds, inside the session's last device time.
set -u
nvidia-smi -L; date; t0=$(date +%s)
CUDA_VISIBLE_DEVICES=0 TREES="$PWD $PWD/.dev22/prev" LABELS="new prev" ROUNDS=3 timeout 255 bash tools/gpu/issue27-lv-ab.sh
echo "end $(( $(date +%s) - t0 )) s"; date
