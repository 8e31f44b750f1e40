//! Captures the git revision, tree state and rustc version for result records.
//!
//! Never fails the build: when git or rustc cannot be run (a source tarball, a
//! sandbox), the values become "unknown".

use std::path::PathBuf;
use std::process::Command;

fn run(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.trim().to_owned())
}

/// Peer crates whose resolved version every echo result names; the env
/// variable is `PETREL_PEER_VERSION_` + the name upper-cased with `-` as `_`.
const PEERS: [&str; 4] = ["tokio-tungstenite", "tokio_kcp", "quinn", "rustls"];

/// The version of package `name` in `Cargo.lock` text (first match).
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == format!("name = \"{name}\"") {
            let version = lines.next()?.trim();
            let v = version.strip_prefix("version = \"")?.strip_suffix('"')?;
            return Some(v.to_owned());
        }
    }
    None
}

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let lock_path = PathBuf::from(manifest).join("../../Cargo.lock");
    let lock = std::fs::read_to_string(&lock_path).unwrap_or_default();
    for peer in PEERS {
        let version = locked_version(&lock, peer).unwrap_or_else(|| "unknown".to_owned());
        let var = peer.to_uppercase().replace('-', "_");
        println!("cargo:rustc-env=PETREL_PEER_VERSION_{var}={version}");
    }
    println!("cargo:rerun-if-changed={}", lock_path.display());

    let revision = run("git", &["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".to_owned());
    // Not `git status`: it refreshes and rewrites `.git/index`. `diff-index`
    // only reads; a file touched but unchanged counts as modified.
    let dirty = match Command::new("git")
        .args(["diff-index", "--quiet", "HEAD", "--"])
        .status()
        .ok()
        .and_then(|s| s.code())
    {
        Some(0) => "false",
        Some(1) => "true",
        _ => "unknown",
    };
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let rustc_version = run(&rustc, &["--version"]).unwrap_or_else(|| "unknown".to_owned());

    println!("cargo:rustc-env=PETREL_GIT_REVISION={revision}");
    println!("cargo:rustc-env=PETREL_GIT_DIRTY={dirty}");
    println!("cargo:rustc-env=PETREL_RUSTC_VERSION={rustc_version}");

    // Rebuild when a commit is made or another revision is checked out. Not
    // on index changes: the user's own `git status` rewrites `.git/index`,
    // and watching it made the next `cargo run` rebuild for minutes. The
    // dirty flag is read again when a record is made (`BuildInfo::current`).
    if let Some(git_dir) = run("git", &["rev-parse", "--absolute-git-dir"]) {
        let git_dir = PathBuf::from(git_dir);
        for file in ["HEAD", "logs/HEAD"] {
            println!("cargo:rerun-if-changed={}", git_dir.join(file).display());
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RUSTC");
}
