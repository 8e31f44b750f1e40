//! The architecture check: no import cycle between the modules of any crate of the
//! workspace. `cargo test -p petrel-modcheck` runs it on the real tree
//! (`tests/workspace.rs`), and so does `cargo test --workspace` in CI.
//!
//! What lives here:
//! - `lexer` (private): Rust source to identifiers and `::`, with comments and
//!   literals skipped;
//! - `parse` (private): one file's child modules, items, `use` declarations and
//!   `crate::`/`super::`/`self::` paths;
//! - [`tree`]: a crate's module tree from its root file ([`ModuleTree`]), read
//!   through [`Sources`] (the disk, or a map of files in tests);
//! - [`graph`]: the rule — a reference is an edge between the two sibling modules
//!   below the closest common ancestor, parents and children may name each other —
//!   and the [`Cycle`]s it finds, each with the file and line of every edge;
//! - [`check_workspace`]: every crate under `crates/`.
//!
//! What does not: macro expansion and `#[path]` attributes (neither is used for
//! modules in this workspace; a `mod` whose file is missing is reported), and
//! imports between crates (Cargo already forbids cycles there).

use std::fs;
use std::path::{Path, PathBuf};

pub mod graph;
mod lexer;
mod parse;
pub mod tree;

pub use graph::{Cycle, Edge};
pub use tree::{Disk, ModuleTree, Sources};

/// The outcome of checking a workspace.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Crate root files checked (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`).
    pub roots: Vec<PathBuf>,
    /// Every cycle found.
    pub cycles: Vec<Cycle>,
    /// Declared modules whose file was not found (`file:line: mod name`).
    pub missing: Vec<String>,
}

/// The crate root files of the crate in `dir`, in a fixed order.
fn crate_roots(dir: &Path) -> Vec<PathBuf> {
    let src = dir.join("src");
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|p| p.is_file())
        .collect();
    let mut bins: Vec<PathBuf> = fs::read_dir(src.join("bin"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    bins.sort();
    roots.extend(bins);
    roots
}

/// Checks every crate in `workspace/crates/*`; paths in the report are relative to
/// `workspace`.
///
/// # Errors
/// The I/O error of listing `workspace/crates`.
pub fn check_workspace(workspace: &Path) -> std::io::Result<Report> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(workspace.join("crates"))?
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    let mut report = Report::default();
    let relative = |p: &Path| p.strip_prefix(workspace).unwrap_or(p).to_owned();
    for root in dirs.iter().flat_map(|d| crate_roots(d)) {
        let tree = ModuleTree::load(&root, &Disk);
        for mut cycle in tree.cycles() {
            cycle.root = relative(&cycle.root);
            for edge in &mut cycle.edges {
                edge.file = relative(&edge.file);
            }
            report.cycles.push(cycle);
        }
        report.missing.extend(tree.missing.iter().cloned());
        report.roots.push(relative(&root));
    }
    Ok(report)
}
