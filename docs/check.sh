#!/usr/bin/env bash
# Checks the user guide (docs/): builds the book with the pinned mdBook and runs
# every Rust snippet of its chapters as a doc test of crates/petrel-guide (which
# includes each chapter; see docs/src/contributing/guide.md for why this instead
# of `mdbook test`). CI runs it from .ci/run. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

# The mdBook release the guide is written for; the search feature only (no
# `serve`/`watch`, which pull in a web server and a file watcher: a faster install).
MDBOOK_VERSION=0.5.4
if ! mdbook --version 2>/dev/null | grep -qx "mdbook v$MDBOOK_VERSION"; then
    cargo install mdbook --version "$MDBOOK_VERSION" --locked \
        --no-default-features --features search
fi

mdbook build docs
# The snippets (doc tests) and the check that every chapter is included.
cargo test -p petrel-guide --doc
cargo test -p petrel-guide --test chapters
