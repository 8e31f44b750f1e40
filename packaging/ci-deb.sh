#!/usr/bin/env bash
# packaging/ci-deb.sh: builds the Debian package (cargo-deb), installs it with
# dpkg -i, runs `petrel reflector serve` as the `petrel` user with the installed
# /etc/petrel/reflector.toml (directly: CI has no systemd), checks GET /healthz
# and one device login, stops it by PID, then removes and purges the package and
# checks what each step leaves. Run as root on a machine where the package is
# not installed (.ci/run calls it); it undoes what it did even when a check fails.
#
# Environment: CARGO_DEB_VERSION (default below) is the cargo-deb installed when
# `cargo deb` is missing or another version. PETREL_DEB_PROFILE (default release,
# what CI ships) selects the cargo profile; `dev` checks the packaging quickly on a
# machine that already has a debug build (cargo-deb warns about it).
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_DEB_VERSION=${CARGO_DEB_VERSION:-3.8.0}
PROFILE=${PETREL_DEB_PROFILE:-release}
case $PROFILE in dev) PROFILE_DIR=debug ;; *) PROFILE_DIR=$PROFILE ;; esac
PKG=petrel
STATE=/var/lib/petrel
CONFIG=/etc/petrel/reflector.toml
# A test account; the device password is only ever given on standard input.
CI_USER=ci-device
CI_PASSWORD=CiLogin42

fail() { echo "ci-deb: FAIL: $*" >&2; exit 1; }
say() { echo "ci-deb: $*"; }

[ "$(id -u)" -eq 0 ] || fail "run as root (dpkg -i, setpriv)"
if dpkg -s "$PKG" >/dev/null 2>&1; then
    fail "package $PKG is already installed; purge it first (dpkg -P $PKG)"
fi
user_existed=0
getent passwd petrel >/dev/null && user_existed=1

started=$(date +%s)
# dpkg-shlibdeps (dpkg-dev) computes the package's library dependencies; adduser is
# one (dpkg -i installs no dependencies).
missing=()
command -v dpkg-shlibdeps >/dev/null 2>&1 || missing+=(dpkg-dev)
command -v adduser >/dev/null 2>&1 || missing+=(adduser)
if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! cargo deb --version 2>/dev/null | grep -qF "$CARGO_DEB_VERSION"; then
    cargo install cargo-deb --version "$CARGO_DEB_VERSION" --locked
fi

# 1. Build: the binary, its man pages (target/man, where the package's assets
#    take them from), the package.
cargo build --profile "$PROFILE" --locked -p petrel-cli
target_dir=$(cargo metadata --format-version 1 --no-deps --locked |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
bin=$target_dir/$PROFILE_DIR/petrel
[ -x "$bin" ] || fail "no binary $bin"
rm -rf target/man
"$bin" man target/man
built=$(date +%s)
deb=$(cargo deb -p petrel-cli --no-build --profile "$PROFILE" | tail -n 1)
[ -f "$deb" ] || fail "cargo deb printed no package path (got '$deb')"
say "built $deb in $((built - started)) s ($PROFILE build and man pages included)"

server_pid=
installed=0
cleanup() {
    local code=$?
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    if [ "$installed" -eq 1 ]; then dpkg -P "$PKG" >/dev/null 2>&1 || true; fi
    if [ "$user_existed" -eq 0 ] && getent passwd petrel >/dev/null; then
        deluser --system petrel >/dev/null 2>&1 || true
    fi
    if [ "$user_existed" -eq 0 ] && getent group petrel >/dev/null; then
        delgroup --system petrel >/dev/null 2>&1 || true
    fi
    [ -n "${work:-}" ] && rm -rf "$work"
    exit "$code"
}
trap cleanup EXIT
work=$(mktemp -d)

# 2. Install.
dpkg -i "$deb"
installed=1
getent passwd petrel >/dev/null || fail "postinst created no petrel user"
[ "$(stat -c '%U:%G %a' "$STATE")" = "petrel:petrel 750" ] ||
    fail "$STATE is $(stat -c '%U:%G %a' "$STATE"), not petrel:petrel 750"
[ "$(stat -c '%U:%G %a' "$CONFIG")" = "root:petrel 640" ] ||
    fail "$CONFIG is $(stat -c '%U:%G %a' "$CONFIG"), not root:petrel 640"
dpkg-query -W -f='${Conffiles}\n' "$PKG" | grep -q " $CONFIG " || fail "$CONFIG is not a conffile"
unit=$(dpkg -L "$PKG" | grep '/systemd/system/petrel-reflector.service$') ||
    fail "no petrel-reflector.service in the package"
if command -v systemd-analyze >/dev/null 2>&1; then
    systemd-analyze verify "$unit"
fi
for page in petrel.1.gz petrel-reflector-serve.1.gz petrel-reflector-login.1.gz; do
    [ -f "/usr/share/man/man1/$page" ] || fail "man page $page not installed"
done
version=$(/usr/bin/petrel --version)
say "installed: $version"
[[ $version =~ ^petrel\ [0-9.]+\ \(([0-9a-f]{7,}(-dirty)?|unknown)\)$ ]] ||
    fail "--version prints '$version'"

# 3. As the petrel user (the unit's User=): an account, then the reflector with
#    the installed config. Ports are ephemeral (the config's 60050 and 9000 may be
#    taken on a shared machine); the store and every other setting are the
#    installed config's.
as_petrel() { (cd "$STATE" && setpriv --reuid=petrel --regid=petrel --init-groups --no-new-privs "$@"); }
as_petrel /usr/bin/petrel reflector user add --db "$STATE/reflector.db" \
    --name "$CI_USER" --callsign N0CI --device-password "$CI_PASSWORD"
log=$work/serve.log
(cd "$STATE" && exec setpriv --reuid=petrel --regid=petrel --init-groups --no-new-privs \
    /usr/bin/petrel reflector serve --config "$CONFIG" \
    --listen 127.0.0.1:0 --http 127.0.0.1:0) >"$log" 2>&1 &
server_pid=$!
for _ in $(seq 1 300); do
    grep -q '^reflector http on ' "$log" && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; fail "the reflector exited at start"; }
    sleep 0.1
done
grep -q '^reflector http on ' "$log" || { cat "$log" >&2; fail "no start-up line within 30 s"; }
udp=$(sed -n 's/^reflector listening on udp \([^ ]*\) (pid \([0-9]*\))$/\1/p' "$log")
pid_said=$(sed -n 's/^reflector listening on udp [^ ]* (pid \([0-9]*\))$/\1/p' "$log")
http=$(sed -n 's/^reflector http on \(.*\)$/\1/p' "$log")
[ "$pid_said" = "$server_pid" ] || fail "reflector says pid '$pid_said', started $server_pid"
[ "$(stat -c %U "/proc/$server_pid")" = petrel ] || fail "the reflector does not run as petrel"
say "reflector pid $server_pid on udp $udp, http $http"

# GET /healthz over bash's /dev/tcp (no curl on a minimal machine).
exec 3<>"/dev/tcp/${http%:*}/${http##*:}"
printf 'GET /healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$http" >&3
health=$(timeout 10 cat <&3 || true)
exec 3<&- 3>&-
head -n 1 <<<"$health" | grep -q '^HTTP/1.1 200' || fail "GET /healthz answered: $health"
say "GET /healthz: $(head -n 1 <<<"$health" | tr -d '\r')"

# One device login, and a wrong password refused (the check can fail).
login=$(/usr/bin/petrel reflector login --server "$udp" --user "$CI_USER" --ssid 1 <<<"$CI_PASSWORD") ||
    fail "device login: $login"
say "$login"
[[ $login == accepted:*"callsign N0CI" ]] || fail "device login printed '$login'"
if wrong=$(/usr/bin/petrel reflector login --server "$udp" --user "$CI_USER" --ssid 2 <<<"Wrong4242"); then
    fail "a wrong device password was accepted: $wrong"
fi
[[ $wrong == refused:*invalid_password* ]] || fail "a wrong password printed '$wrong'"
[ "$(stat -c %U "$STATE/reflector.db")" = petrel ] || fail "the store is not owned by petrel"

kill -TERM "$server_pid"
status=0
wait "$server_pid" || status=$?
server_pid=
[ "$status" -eq 0 ] || { cat "$log" >&2; fail "the reflector exited with $status on SIGTERM"; }
grep -Eq '^stopped: [0-9]+ datagrams in, [1-9][0-9]* logins' "$log" ||
    { cat "$log" >&2; fail "no login counted in the stop line"; }
say "$(grep '^stopped:' "$log")"

# 4. Remove: the binary goes; the config (a conffile) and the state stay.
dpkg -r "$PKG"
[ ! -e /usr/bin/petrel ] || fail "/usr/bin/petrel left after dpkg -r"
[ -f "$CONFIG" ] || fail "dpkg -r removed the conffile $CONFIG"
[ -f "$STATE/reflector.db" ] || fail "dpkg -r removed the store"

# 5. Purge: the config, the state and the statoverride go; the user stays.
dpkg -P "$PKG"
installed=0
! dpkg -s "$PKG" >/dev/null 2>&1 || fail "$PKG still known to dpkg after purge"
[ ! -e /etc/petrel ] || fail "/etc/petrel left after purge"
[ ! -e "$STATE" ] || fail "$STATE left after purge"
! dpkg-statoverride --list "$CONFIG" >/dev/null 2>&1 || fail "statoverride left after purge"
say "installed, served a device, removed and purged in $(($(date +%s) - started)) s"
