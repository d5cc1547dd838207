# Sourced by scripts/test and .ci/run: starts a private, throwaway Postgres for the test suite
# and exports DATABASE_URL. It installs the server only when it is missing, never touches a
# system cluster (own data dir, own port) and stops it when the calling shell exits.

log() { printf '\n==> %s\n' "$*"; }

as_root() { [ "$(id -u)" = 0 ]; }

apt_install() {
    if ! as_root; then
        echo "missing packages ($*) and not root: install them first" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    if [ -z "${APT_UPDATED:-}" ]; then
        apt-get update
        APT_UPDATED=1
    fi
    apt-get install -y --no-install-recommends "$@"
}

find_initdb() {
    # The newest installed major version wins.
    ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 || true
}

start_private_postgres() {
    INITDB="$(find_initdb)"
    if [ -z "$INITDB" ]; then
        log "installing postgresql"
        apt_install postgresql
        INITDB="$(find_initdb)"
    fi
    if [ -z "$INITDB" ]; then
        echo "no initdb under /usr/lib/postgresql/*/bin after installing postgresql" >&2
        exit 1
    fi
    PGBIN="$(dirname "$INITDB")"

    # Postgres refuses to run as root: as root, run it as the postgres user.
    if as_root; then
        if ! id -u postgres >/dev/null 2>&1; then
            useradd --system --no-create-home --shell /usr/sbin/nologin postgres
        fi
        PG_AS=(runuser -u postgres --)
    else
        PG_AS=()
    fi

    PGDIR="$(mktemp -d "${TMPDIR:-/tmp}/herald-ci-pg.XXXXXX")"
    if as_root; then
        chown postgres:postgres "$PGDIR"
    fi

    stop_postgres() {
        if [ -f "$PGDIR/data/postmaster.pid" ]; then
            "${PG_AS[@]}" "$PGBIN/pg_ctl" -D "$PGDIR/data" -m fast -w stop >/dev/null 2>&1 || true
        fi
        rm -rf "$PGDIR"
    }
    trap stop_postgres EXIT

    free_port() {
        if command -v python3 >/dev/null 2>&1; then
            python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
            return
        fi
        local port
        for port in $(seq 54329 54429); do
            # A refused connection means nobody listens there.
            if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
                echo "$port"
                return
            fi
        done
        echo "no free port in 54329-54429" >&2
        return 1
    }
    PORT="$(free_port)"

    log "starting Postgres ($PGBIN) on 127.0.0.1:$PORT"
    "${PG_AS[@]}" "$INITDB" -D "$PGDIR/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
    if ! "${PG_AS[@]}" "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/log" -w start \
        -o "-p $PORT -k $PGDIR -c listen_addresses=127.0.0.1 -c fsync=off" >/dev/null; then
        cat "$PGDIR/log" >&2 || true
        exit 1
    fi
    export DATABASE_URL="postgres://postgres@127.0.0.1:$PORT/postgres"


}
