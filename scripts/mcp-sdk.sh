# Sourced by scripts/test (after scripts/postgres.sh, for log and apt_install): makes sure the
# MCP tests' server on the official Python SDK (`mcp` 1.x from PyPI) can run, in a venv at
# .mcp-venv that test-support/src/mcp.rs (sdk_python) finds. Installs only what is missing.

ensure_mcp_sdk() {
    if .mcp-venv/bin/python3 -c 'import mcp.server.fastmcp' >/dev/null 2>&1; then
        return
    fi
    log "installing the Python MCP SDK into .mcp-venv"
    python3 -m venv .mcp-venv 2>/dev/null || { apt_install python3-venv && python3 -m venv .mcp-venv; }
    .mcp-venv/bin/python3 -m pip install --quiet 'mcp>=1.9,<2'
}
