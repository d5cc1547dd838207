# Sourced by scripts/test (after scripts/postgres.sh, for log and apt_install): makes sure the
# Python the tests drive real SDKs with can run, in a venv at .mcp-venv: the MCP tests' server on
# the official MCP SDK (`mcp` 1.x, found by test-support/src/mcp.rs sdk_python) and the `openai`
# SDK the OpenAI-compatible API tests drive (tests/it/e2e_openai_api.rs). Installs only what is
# missing.

ensure_mcp_sdk() {
    if ! .mcp-venv/bin/python3 -c 'import mcp.server.fastmcp' >/dev/null 2>&1; then
        log "installing the Python MCP SDK into .mcp-venv"
        python3 -m venv .mcp-venv 2>/dev/null || { apt_install python3-venv && python3 -m venv .mcp-venv; }
        .mcp-venv/bin/python3 -m pip install --quiet 'mcp>=1.9,<2'
    fi
    if ! .mcp-venv/bin/python3 -c 'import openai' >/dev/null 2>&1; then
        log "installing the openai Python SDK into .mcp-venv"
        .mcp-venv/bin/python3 -m pip install --quiet 'openai>=1.40,<3'
    fi
}
