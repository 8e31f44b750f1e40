#!/usr/bin/env bash
# Takes a screenshot of the operator dashboard for a reviewer: runs the
# browser test (tests/dashboard_browser.rs: a reflector on loopback, two
# devices that talk, headless Chromium signed in) and prints where the PNG
# is. Needs Chromium (apt install chromium).
#
#   crates/petrel-reflector/tests/dashboard_screenshot.sh [output.png]
#
# Without an argument the pictures are
# target/tmp/dashboard-browser-{sqlite,postgres}/dashboard.png.
set -euo pipefail
cd "$(dirname "$0")/../../.."
if [[ $# -gt 0 ]]; then
    PETREL_DASHBOARD_SCREENSHOT="$(realpath -m "$1")"
    export PETREL_DASHBOARD_SCREENSHOT
fi
PETREL_REQUIRE_CHROMIUM=1 cargo test -p petrel-reflector --test dashboard_browser -- --nocapture 2>&1 \
    | grep -E '^(dashboard screenshot:|test result:)|panicked' || true
