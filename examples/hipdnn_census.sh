#!/usr/bin/env bash
# Before enabling hipDNN: which of a model's convolutions a ckspace plugin serves, and a rule file
# that routes those to it. No GPU needed: the census links the tree's plugin without kernels and
# asks it through hipDNN's plugin C API, as hipDNN does.
#
#     bash hipdnn_census.sh [PROBLEMS] [ARCH]
#
# PROBLEMS: a problems CSV (a `bias` column of 0/1 marks the layers with a bias) or a shipped
# workload name (default: torchvision-vgg16, every layer biased); ARCH: default gfx942.
set -euo pipefail
problems=${1:-torchvision-vgg16}
arch=${2:-gfx942}

# The kernels for the workload's directions, dtype and dims, with the plugin beside them.
ckspace emit --arch "$arch" --rule-set default --variant all --ndim 2 --dtype bf16 \
    --hipdnn-plugin --out kernels > /dev/null

# PyTorch's default layout (NCHW), one training step (forward, bwd_data, bwd_weight) per layer.
ckspace hipdnn census kernels --problems "$problems" --hipdnn-rules rules.json | sed -n '/^totals/,$p'

# The same in JSON, for a script: the layers the plugin declines, with its reasons.
ckspace hipdnn census kernels --problems "$problems" --format json > census.json
echo "census.json and rules.json written; export HIPDNN_HEUR_CONFIG_PATH=$PWD/rules.json to route them"
