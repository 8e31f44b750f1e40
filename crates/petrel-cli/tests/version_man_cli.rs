//! `petrel --version` names the git revision the binary was built from, and
//! the hidden `petrel man DIR` writes a man page per visible subcommand
//! (what the Debian package installs, `packaging/README.md`).

#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;

/// `git args…` in this crate's directory: trimmed stdout, or `None`.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[test]
fn version_names_the_package_version_and_the_git_revision() {
    let out = support::petrel(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    let line = String::from_utf8(out.stdout).unwrap();
    let rest = line
        .trim_end()
        .strip_prefix(&format!("petrel {} (", env!("CARGO_PKG_VERSION")))
        .unwrap_or_else(|| panic!("{line:?}"));
    let revision = rest.strip_suffix(')').unwrap_or_else(|| panic!("{line:?}"));
    // The build script reran when HEAD or the branch moved, so the binary
    // under test names the checkout's current commit.
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(head) => assert_eq!(revision.trim_end_matches("-dirty"), head, "{line:?}"),
        None => assert_eq!(revision, "unknown", "{line:?}"),
    }
}

#[test]
fn man_writes_a_page_per_visible_subcommand() {
    let dir = std::env::temp_dir().join(format!("petrel-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = support::petrel(&["man", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let page = |name: &str| std::fs::read_to_string(dir.join(name));
    let top = page("petrel.1").unwrap();
    assert!(top.contains(".TH petrel 1"), "not a roff page: {top}");
    assert!(top.contains("reflector"), "{top}");
    let serve = page("petrel-reflector-serve.1").unwrap();
    assert!(serve.contains("config"), "{serve}");
    assert!(page("petrel-reflector-login.1").is_ok());
    assert!(page("petrel-bench.1").is_ok());
    // The generator itself is hidden: no page, and not in `--help`.
    assert!(page("petrel-man.1").is_err());
    assert!(!top.contains("petrel\\-man"), "{top}");
    let said = String::from_utf8(out.stdout).unwrap();
    let count = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(
        said.trim(),
        format!("{count} man pages in {}", dir.display())
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
