# Sourced by scripts/test (after scripts/postgres.sh, for log and apt_install): makes sure the
# Matrix tests' homeserver can run: Synapse (`matrix-synapse` from PyPI) in a venv at
# .synapse-venv, found by test-support/src/synapse/server.rs. The tests start it themselves on
# a free port with a generated config (SQLite, registration by shared secret, no federation).
# Installs only what is missing.

ensure_synapse() {
    if ! .synapse-venv/bin/python3 -c 'import synapse.app.homeserver' >/dev/null 2>&1; then
        log "installing Synapse (matrix-synapse) into .synapse-venv"
        python3 -m venv .synapse-venv 2>/dev/null || { apt_install python3-venv && python3 -m venv .synapse-venv; }
        .synapse-venv/bin/python3 -m pip install --quiet 'matrix-synapse>=1.163,<2'
    fi
}
