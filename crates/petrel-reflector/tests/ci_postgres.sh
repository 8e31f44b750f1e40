#!/usr/bin/env bash
# PostgreSQL for the reflector store tests (crates/petrel-reflector/src/store/tests.rs).
# Installs the Debian server if missing, starts its cluster, creates the test role and
# database if missing, and exports PETREL_TEST_PG_URL and PETREL_REQUIRE_PG=1.
# Idempotent: a second run finds everything in place and only re-exports.
#
#   . crates/petrel-reflector/tests/ci_postgres.sh              # from .ci/run: exports
#   eval "$(crates/petrel-reflector/tests/ci_postgres.sh)"      # run as a program: prints the exports
#
# Runs as root or as a user with sudo. The server is left running.

petrel_pg_setup() {
    local role=petrel password=petrel db=petrel_test
    as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
    as_postgres() {
        if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi
    }

    if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
        as_root apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    fi
    local ver
    ver=$(basename "$(ls -d /usr/lib/postgresql/*/ | sort -V | tail -n 1)")
    # Containers without an init system may skip the package's cluster creation.
    if ! as_root pg_lsclusters -h | awk -v v="$ver" '$1 == v && $2 == "main"' | grep -q .; then
        as_root pg_createcluster "$ver" main >/dev/null
    fi
    if ! as_root pg_lsclusters -h | awk -v v="$ver" '$1 == v && $2 == "main" && $4 == "online"' | grep -q .; then
        as_root pg_ctlcluster "$ver" main start
    fi
    local port
    port=$(as_root pg_lsclusters -h | awk -v v="$ver" '$1 == v && $2 == "main" { print $3 }')
    local tries=0
    until pg_isready -q -h 127.0.0.1 -p "$port"; do
        tries=$((tries + 1))
        if [ "$tries" -ge 30 ]; then
            echo "ci_postgres: PostgreSQL $ver on port $port did not become ready" >&2
            return 1
        fi
        sleep 1
    done

    if ! as_postgres psql -p "$port" -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$role'" | grep -q 1; then
        as_postgres psql -p "$port" -q -c "CREATE ROLE $role LOGIN PASSWORD '$password'"
    fi
    if ! as_postgres psql -p "$port" -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
        as_postgres createdb -p "$port" -O "$role" "$db"
    fi

    PETREL_TEST_PG_URL="postgres://$role:$password@127.0.0.1:$port/$db"
    PETREL_REQUIRE_PG=1
    export PETREL_TEST_PG_URL PETREL_REQUIRE_PG
}

if [ "${BASH_SOURCE[0]}" != "$0" ]; then
    petrel_pg_setup
else
    set -euo pipefail
    petrel_pg_setup >&2
    printf 'export PETREL_TEST_PG_URL=%q\nexport PETREL_REQUIRE_PG=1\n' "$PETREL_TEST_PG_URL"
fi
