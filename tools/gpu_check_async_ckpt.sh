#!/bin/sh
# The GPU check of asynchronous checkpoints (see tools/gpu_check_async_ckpt.py): needs python3 with a CUDA
# PyTorch, transformers and accelerate; prints PASS or FAIL last, exit 0 only on PASS.
cd "$(dirname "$0")/.." || exit 1
PYTHONUNBUFFERED=1 exec "${PYTHON:-python3}" tools/gpu_check_async_ckpt.py "$@"
