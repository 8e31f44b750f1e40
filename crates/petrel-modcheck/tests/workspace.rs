//! The architecture check on the real tree: no import cycle between the modules of
//! any crate under `crates/` (the rule is in `petrel_modcheck::graph`).
//!
//! Run it alone with `cargo test -p petrel-modcheck --test workspace`.

use std::path::Path;

#[test]
fn no_crate_has_an_import_cycle_between_modules() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let workspace = workspace.canonicalize().unwrap_or(workspace);
    let report = match petrel_modcheck::check_workspace(&workspace) {
        Ok(report) => report,
        Err(e) => panic!("cannot list {}/crates: {e}", workspace.display()),
    };
    assert!(
        report.roots.len() >= 8,
        "only {} crate roots found under {}",
        report.roots.len(),
        workspace.display()
    );
    assert!(
        report.missing.is_empty(),
        "declared modules without a file:\n{}",
        report.missing.join("\n")
    );
    let cycles: Vec<String> = report.cycles.iter().map(ToString::to_string).collect();
    assert!(
        cycles.is_empty(),
        "{} import cycle(s) between modules:\n{}",
        cycles.len(),
        cycles.join("\n")
    );
}
