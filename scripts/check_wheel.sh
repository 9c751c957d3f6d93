#!/usr/bin/env bash
# The package as a user gets it from an index: build the sdist and, from it, the wheel (python -m build); check
# that every data file of the package is inside the wheel; install the wheel (not editable) into a fresh venv;
# run `proofrl --version`, `proofrl doctor`, `proofrl check` on the bundled sample, a recipe's --show-config and
# `proofrl view` from that venv, outside the checkout.
# The venv sees this interpreter's site-packages (--system-site-packages), so torch and the other dependencies
# are not downloaded again; the wheel is installed with --no-deps and its own copy of proofrl must be the one
# imported. Needs Coq (scripts/setup.sh installs it) and the `build` package (the test extra).
# PYTHON=/path/to/python picks the interpreter (default: python, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_ROOT_USER_ACTION=ignore
say() { printf 'check_wheel: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
# logged NAME CMD...: run CMD with its output in $work/NAME.log; on failure show the log and stop
logged() {
  local name="$1"; shift
  "$@" >"$work/$name.log" 2>&1 || { tail -40 "$work/$name.log" >&2; die "failed: $*"; }
}
# expect NAME PATTERN WHY: NAME's log has a line matching PATTERN, else show the log and stop
expect() { grep -q "$2" "$work/$1.log" || { tail -40 "$work/$1.log" >&2; die "$3"; }; }

PY="${PYTHON:-$(command -v python || command -v python3)}"
"$PY" -m build --version >/dev/null 2>&1 \
  || die "the build package is missing: pip install build (it is in the test extra)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

say "building the sdist and, from it, the wheel"
logged build "$PY" -m build --outdir "$work/dist" .
wheel=("$work"/dist/proofrl-*.whl)
sdist=("$work"/dist/proofrl-*.tar.gz)
[[ -f "${wheel[0]}" && -f "${sdist[0]}" ]] || die "python -m build wrote no wheel or no sdist"
version="$(basename "${wheel[0]}" | cut -d- -f2)"
say "built $(basename "${sdist[0]}") and $(basename "${wheel[0]}")"

# Every file of the package that is not Python source (recipes, bundled data, py.typed, the viewer's script and
# style) must be in the wheel: the files under proofrl/ that git does not ignore, or every file there without git.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files --cached --others --exclude-standard proofrl | grep -v '\.py$' >"$work/data-files" || true
else
  find proofrl -type f ! -name '*.py' ! -name '*.pyc' | sort >"$work/data-files"
fi
grep -qx 'proofrl/py.typed' "$work/data-files" || die "proofrl/py.typed is missing from the source tree"
"$PY" - "${wheel[0]}" "$work/data-files" <<'PY' \
  || die "files missing from the wheel (see above): add them to [tool.setuptools.package-data] in pyproject.toml"
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
want = [line.strip() for line in open(sys.argv[2]) if line.strip()]
missing = [w for w in want if w not in names]
for w in missing:
    print(f"check_wheel: not in the wheel: {w}", file=sys.stderr)
sys.exit(1 if missing else 0)
PY

say "installing the wheel into a fresh venv"
"$PY" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install -q --no-deps "${wheel[0]}"
cd "$work"  # outside the checkout: nothing can be imported from the source tree
bin="$work/venv/bin"
where="$("$bin/python" -c 'import proofrl; print(proofrl.__file__)')"
[[ "$where" == "$work/venv/"* ]] || die "proofrl was imported from $where, not from the installed wheel"
"$bin/python" - <<'PY' || die "py.typed is not installed"
import importlib.resources, sys
sys.exit(not importlib.resources.files("proofrl").joinpath("py.typed").is_file())
PY

logged version "$bin/proofrl" --version
expect version "^proofrl $version\$" "proofrl --version does not say $version, the wheel's version"
logged doctor "$bin/proofrl" doctor
logged check "$bin/proofrl" check --show 0  # the bundled sample, each record with its expected verdict
expect check "as expected" "proofrl check did not read the bundled sample's expectations"
logged config "$bin/proofrl" train --recipe reap --show-config
expect config "^loop: expert-iteration" "the reap recipe did not load from the wheel"

# proofrl view reads its script and style from the installed package
mkdir -p run/trees
printf '{"name": "t", "status": "failed", "proof": "", "tree": "trees/t.json"}\n' >run/results.jsonl
printf '{"root": 0, "nodes": [{"id": 0, "kind": "OR", "goals": ["|- True"]}], "edges": []}\n' >run/trees/t.json
"$bin/proofrl" view run >/dev/null || die "proofrl view failed"
grep -q 'id="proofrl-data"' run/view.html && grep -q 'JSON.parse' run/view.html \
  || die "proofrl view wrote a page without its script"

say "ok: proofrl $version from its wheel: --version, doctor, check ($(tail -1 "$work/check.log")), recipe reap, view"
