//! Names the git revision `petrel --version` prints: `PETREL_VERSION` is
//! `<package version> (<short revision>[-dirty])`, e.g. `0.1.0 (63baea7)`.
//!
//! Never fails the build: without git or outside a checkout (a crates.io or
//! source tarball) the revision is `unknown`. `-dirty` means tracked files
//! differed from the commit when this script last ran; it reruns when a
//! commit is made or another revision is checked out (`HEAD`, the branch's
//! ref and `packed-refs`), not on every edit.

use std::path::PathBuf;
use std::process::Command;

/// `git args…` run in the package directory: its trimmed stdout, or `None`
/// when git is missing or fails (e.g. not a checkout).
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn main() {
    let revision = match git(&["rev-parse", "--short", "HEAD"]) {
        Some(short) => {
            // `diff-index` only reads (`git status` would rewrite the index).
            let dirty = Command::new("git")
                .args(["diff-index", "--quiet", "HEAD", "--"])
                .status()
                .ok()
                .and_then(|s| s.code())
                == Some(1);
            if dirty {
                format!("{short}-dirty")
            } else {
                short
            }
        }
        None => "unknown".to_owned(),
    };
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=PETREL_VERSION={version} ({revision})");

    // HEAD moves on checkout; the branch's ref (loose or packed) on commit.
    // Only files that exist: Cargo reruns the script on every build for a
    // missing one.
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(reference);
    }
    for file in watched {
        let path = git(&["rev-parse", "--git-path", file.as_str()]).map(PathBuf::from);
        if let Some(path) = path.filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
