#!/usr/bin/env bash
# Installs the reference MCP filesystem server (`@modelcontextprotocol/server-filesystem`,
# the version pinned in interop/mcp-filesystem/package.json, every dependency as
# package-lock.json locks it) into interop/mcp-filesystem/node_modules.
#
# The interoperability test (`cargo test -p crew-runtime --test mcp_filesystem_interop
# -- --ignored`) and the mcp_filesystem example use it from there. Needs Node.js 18 or
# later and npm.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
npm ci --prefix "$here/mcp-filesystem" --ignore-scripts --no-audit --no-fund
server="$here/mcp-filesystem/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
test -f "$server"
echo "installed: $server"
