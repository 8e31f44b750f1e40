//! Every chapter of the guide's table of contents (`docs/src/SUMMARY.md`) is
//! included in `src/lib.rs`, so its Rust snippets are tested, and every
//! included file is in the table of contents.

use std::collections::BTreeSet;

const SUMMARY: &str = include_str!("../../../docs/src/SUMMARY.md");
const LIB: &str = include_str!("../src/lib.rs");

/// The targets of `[title](target)` links in `text`.
fn link_targets(text: &str) -> BTreeSet<&str> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .collect()
}

/// The paths of `include_str!("../../../docs/src/<path>")` in `text`.
fn included(text: &str) -> BTreeSet<&str> {
    text.split("include_str!(\"../../../docs/src/")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .collect()
}

#[test]
fn every_chapter_is_tested_and_every_tested_file_is_a_chapter() {
    let chapters = link_targets(SUMMARY);
    assert!(chapters.len() > 10, "SUMMARY.md lists {chapters:?}");
    assert_eq!(chapters, included(LIB));
}
