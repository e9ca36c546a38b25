#!/usr/bin/env bash
# Installs the ctxhost context engine into Hermes, the way Hermes finds user plugins: the plugin
# folder copied to $HERMES_HOME/plugins/ctxhost/ (HERMES_HOME defaults to ~/.hermes), then, with
# Hermes' own commands, `context.engine: ctxhost` and `plugins.enabled: [ctxhost]` in
# $HERMES_HOME/config.yaml.
#
#   bash integrations/hermes/install.sh            (HERMES=/path/to/hermes if it is not on PATH)
#
# A copy, not a link: the plugin keeps working when the checkout moves or changes branch.
# Running it again replaces the copy (an upgrade).
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
HERMES_HOME=${HERMES_HOME:-$HOME/.hermes}
HERMES=${HERMES:-hermes}
DEST=$HERMES_HOME/plugins/ctxhost

command -v "$HERMES" >/dev/null 2>&1 ||
    { echo "install.sh: no \`$HERMES\` command: install hermes-agent, or set HERMES to its path" >&2; exit 1; }
for file in plugin.yaml __init__.py engine.py messages.py sidecar.py; do
    [[ -f $SRC/$file ]] || { echo "install.sh: $SRC/$file is missing: run this from a ctxhost checkout" >&2; exit 1; }
done

mkdir -p "$DEST.new"
cp "$SRC"/{plugin.yaml,__init__.py,engine.py,messages.py,sidecar.py} "$DEST.new/"
rm -rf "$DEST" && mv "$DEST.new" "$DEST"
export HERMES_HOME
"$HERMES" config set context.engine ctxhost >/dev/null
# The engine replaces no built-in tool: the override grant is declined without a prompt.
"$HERMES" plugins enable ctxhost --no-allow-tool-override >/dev/null
echo "ctxhost: installed in $DEST; context.engine is ctxhost in $HERMES_HOME/config.yaml"
if ! command -v "${CTXHOST_BIN:-ctxhost}" >/dev/null 2>&1; then
    echo "ctxhost: note: no ctxhost binary on PATH; set CTXHOST_BIN (or context.ctxhost.binary in config.yaml) to it, else Hermes compacts with its own compressor and warns" >&2
fi
