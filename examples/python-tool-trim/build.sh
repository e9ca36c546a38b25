#!/usr/bin/env bash
# Builds tool_trim.wasm from app.py with componentize-py, pinned below, against the
# repository's wit/0.2.0. The toolchain is installed once (from PyPI, into a virtualenv) under
# $TOOLCHAINS, by default the repository's target/foreign-engines/.
#
#   bash build.sh [OUTPUT]        (default OUTPUT: tool_trim.wasm beside this script)
#
# Needs python3 (3.10 or newer) with venv; exits 3 when componentize-py cannot be installed
# (e.g. offline), so callers can tell "no toolchain" from a failed build.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
COMPONENTIZE_PY_VERSION=0.25.0
WIT=$HERE/../../wit/0.2.0
TOOLCHAINS=${TOOLCHAINS:-$HERE/../../target/foreign-engines}
OUTPUT=${1:-$HERE/tool_trim.wasm}
VENV=$TOOLCHAINS/componentize-py-$COMPONENTIZE_PY_VERSION

if [[ ! -f $VENV/.complete ]]; then
    command -v python3 >/dev/null || { echo "no python3 to install componentize-py into" >&2; exit 3; }
    rm -rf "$VENV"
    mkdir -p "$TOOLCHAINS"
    python3 -m venv "$VENV" || exit 3
    "$VENV/bin/pip" install --quiet --disable-pip-version-check \
        "componentize-py==$COMPONENTIZE_PY_VERSION" || exit 3
    touch "$VENV/.complete"
fi

cd "$HERE"
"$VENV/bin/componentize-py" -d "$WIT" -w context-engine componentize app -o "$OUTPUT"
