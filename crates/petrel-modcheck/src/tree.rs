//! A crate's module tree, read from its root file (`src/lib.rs`, `src/main.rs`) by
//! following `mod` declarations to `name.rs` or `name/mod.rs`, with each module's
//! parsed facts (child modules, items, imports, references) kept in one record per
//! module.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::parse::{parse, ChildDecl, ModuleFacts, RawPath};

/// Where source files come from: the disk, or an in-memory tree in tests.
pub trait Sources {
    /// The text of the file at `path`, `None` if there is none.
    fn read(&self, path: &Path) -> Option<String>;
}

/// Reads files from the file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct Disk;

impl Sources for Disk {
    fn read(&self, path: &Path) -> Option<String> {
        fs::read_to_string(path).ok()
    }
}

impl Sources for BTreeMap<PathBuf, String> {
    fn read(&self, path: &Path) -> Option<String> {
        self.get(path).cloned()
    }
}

/// A path named in a module, where it was named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reference {
    pub path: RawPath,
    pub file: PathBuf,
    pub line: usize,
}

/// One module of the tree.
#[derive(Debug, Clone, Default)]
pub(crate) struct Module {
    /// Names from the crate root (empty for the root).
    pub path: Vec<String>,
    pub parent: Option<usize>,
    pub children: BTreeMap<String, usize>,
    pub items: BTreeSet<String>,
    /// Names bound by `use`, and the paths as written.
    pub imports: BTreeMap<String, RawPath>,
    pub globs: Vec<RawPath>,
    pub references: Vec<Reference>,
}

/// A crate's modules; index 0 is the root.
#[derive(Debug, Clone)]
pub struct ModuleTree {
    /// The root file.
    pub root: PathBuf,
    pub(crate) modules: Vec<Module>,
    /// Declared modules whose file was not found.
    pub missing: Vec<String>,
}

impl ModuleTree {
    /// Reads the crate whose root file is `root`.
    pub fn load(root: &Path, sources: &dyn Sources) -> Self {
        let mut tree = Self {
            root: root.to_owned(),
            modules: vec![Module::default()],
            missing: Vec::new(),
        };
        match sources.read(root) {
            Some(text) => {
                let dir = root.parent().unwrap_or(Path::new("")).to_owned();
                tree.add(0, parse(&text), root, &dir, sources);
            }
            None => tree.missing.push(root.display().to_string()),
        }
        tree
    }

    /// Fills module `id` from `facts` (read from `file`); its file children live in
    /// `dir`.
    fn add(
        &mut self,
        id: usize,
        facts: ModuleFacts,
        file: &Path,
        dir: &Path,
        sources: &dyn Sources,
    ) {
        let module = &mut self.modules[id];
        module.items = facts.items;
        module.imports = facts.imports.into_iter().collect();
        module.globs = facts.globs;
        module.references = facts
            .mentions
            .into_iter()
            .map(|m| Reference {
                path: m.path,
                file: file.to_owned(),
                line: m.line,
            })
            .collect();
        for child in facts.children {
            let (name, body) = match child {
                ChildDecl::Inline { name, facts } => (name, Some((facts, file.to_owned()))),
                ChildDecl::File { name, line } => {
                    let flat = dir.join(format!("{name}.rs"));
                    let nested = dir.join(&name).join("mod.rs");
                    let found = [flat, nested]
                        .into_iter()
                        .find_map(|p| sources.read(&p).map(|text| (parse(&text), p)));
                    if found.is_none() {
                        self.missing
                            .push(format!("{}:{line}: mod {name}", file.display()));
                    }
                    (name, found)
                }
            };
            let child_id = self.modules.len();
            let mut path = self.modules[id].path.clone();
            path.push(name.clone());
            self.modules.push(Module {
                path,
                parent: Some(id),
                ..Module::default()
            });
            self.modules[id].children.insert(name.clone(), child_id);
            if let Some((facts, child_file)) = body {
                self.add(child_id, facts, &child_file, &dir.join(&name), sources);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_inline_modules_nest() {
        let files: BTreeMap<PathBuf, String> = [
            ("src/lib.rs", "mod a; mod b; mod gone;"),
            ("src/a.rs", "mod inner { mod deep; }"),
            ("src/a/inner/deep.rs", "fn f() {}"),
            ("src/b/mod.rs", "mod c;"),
            ("src/b/c.rs", ""),
        ]
        .into_iter()
        .map(|(p, s)| (PathBuf::from(p), s.to_owned()))
        .collect();
        let tree = ModuleTree::load(Path::new("src/lib.rs"), &files);
        let paths: Vec<String> = tree.modules.iter().map(|m| m.path.join("::")).collect();
        assert_eq!(
            paths,
            ["", "a", "a::inner", "a::inner::deep", "b", "b::c", "gone"]
        );
        assert!(tree.modules[3].items.contains("f"));
        assert_eq!(tree.missing, ["src/lib.rs:1: mod gone"]);
    }
}
