//! The import graph of a [`ModuleTree`] and its cycles.
//!
//! # The rule
//!
//! Every path a module names is resolved to the module that defines what it names,
//! following `use` aliases, `pub use` re-exports and glob imports (a name re-exported
//! by a parent leads to the child that defines it). A reference from module `M` to
//! module `T` is then an edge between the two **siblings** that contain them below
//! their closest common ancestor `P`: `a → b`, where `a` is the child of `P` on the
//! way to `M` and `b` the child of `P` on the way to `T`. So `crate::b::x` named in
//! `a/deep.rs` is the edge `a → b` among the children of the crate root, and
//! `super::recording::X` named in `session/verifier.rs` is `verifier → recording`
//! among the children of `session`.
//!
//! A reference from a module to its own descendants (a parent's `mod` and
//! `pub use child::X`) or to its ancestors (a child's `use super::Y` where `Y` is
//! defined in the parent's own file) has no such pair and makes no edge: a parent
//! and its children may name each other freely. Any cycle among the siblings of one
//! parent, at any depth, is reported.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::PathBuf;

use crate::tree::ModuleTree;

/// How many aliases, re-exports or globs one resolution follows at most.
const MAX_HOPS: usize = 16;

/// One edge between siblings and the reference that makes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The sibling that names the other.
    pub from: String,
    /// The sibling named.
    pub to: String,
    /// The file and line of the first such reference.
    pub file: PathBuf,
    pub line: usize,
    /// The path as written there.
    pub named: String,
}

/// Siblings below one parent module that import each other in a circle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// The crate's root file.
    pub root: PathBuf,
    /// The parent module, `crate` or `crate::a::b`.
    pub parent: String,
    /// A shortest cycle through the first member (by name), its first module
    /// repeated at the end: `[a, b, a]`.
    pub path: Vec<String>,
    /// Every member of the strongly connected set the cycle belongs to.
    pub members: Vec<String>,
    /// Every edge among the members, one reference each.
    pub edges: Vec<Edge>,
}

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: import cycle among the children of `{}`: {}",
            self.root.display(),
            self.parent,
            self.path.join(" → ")
        )?;
        if self.members.len() + 1 > self.path.len() {
            writeln!(f, "  (all of {} reach each other)", self.members.join(", "))?;
        }
        for e in &self.edges {
            writeln!(
                f,
                "  {} → {}: {}:{} names {}",
                e.from,
                e.to,
                e.file.display(),
                e.line,
                e.named
            )?;
        }
        Ok(())
    }
}

impl ModuleTree {
    fn parent_of(&self, m: usize) -> Option<usize> {
        self.modules[m].parent
    }

    /// The module a path written in module `at` starts from, and the segments
    /// after it; `None` for paths into other crates.
    fn start(&self, at: usize, raw: &[String], hops: usize) -> Option<(usize, Vec<String>)> {
        let (first, rest) = raw.split_first()?;
        match first.as_str() {
            "crate" => Some((0, rest.to_vec())),
            "self" => Some((at, rest.to_vec())),
            "super" => {
                let mut m = self.parent_of(at)?;
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    m = self.parent_of(m)?;
                    rest = &rest[1..];
                }
                Some((m, rest.to_vec()))
            }
            name if self.modules[at].children.contains_key(name) => Some((at, raw.to_vec())),
            name => {
                let target = self.modules[at].imports.get(name)?;
                if hops == 0 || target.as_slice() == raw {
                    return None;
                }
                let (m, mut segs) = self.start(at, target, hops - 1)?;
                segs.extend_from_slice(rest);
                Some((m, segs))
            }
        }
    }

    /// Whether module `m` has something called `name`.
    fn defines(&self, m: usize, name: &str) -> bool {
        let module = &self.modules[m];
        module.children.contains_key(name)
            || module.items.contains(name)
            || module.imports.contains_key(name)
    }

    /// The module that defines what `segs` names from module `m`.
    fn walk(&self, m: usize, segs: &[String], hops: usize) -> usize {
        let mut cur = m;
        for (i, seg) in segs.iter().enumerate() {
            let module = &self.modules[cur];
            if seg == "self" {
                continue;
            }
            if seg == "super" {
                match module.parent {
                    Some(p) => cur = p,
                    None => return cur,
                }
                continue;
            }
            if let Some(&child) = module.children.get(seg) {
                cur = child;
                continue;
            }
            if hops == 0 || module.items.contains(seg) {
                return cur;
            }
            if let Some(target) = module.imports.get(seg) {
                return match self.start(cur, target, hops - 1) {
                    Some((start, mut rest)) => {
                        rest.extend_from_slice(&segs[i + 1..]);
                        self.walk(start, &rest, hops - 1)
                    }
                    None => cur,
                };
            }
            for glob in &module.globs {
                if let Some((start, rest)) = self.start(cur, glob, hops - 1) {
                    let source = self.walk(start, &rest, hops - 1);
                    if source != cur && self.defines(source, seg) {
                        return self.walk(source, &segs[i..], hops - 1);
                    }
                }
            }
            return cur;
        }
        cur
    }

    /// The sibling edge a reference from `from` to `to` makes: the common ancestor
    /// and the two children of it, or `None` when one contains the other.
    fn lift(&self, from: usize, to: usize) -> Option<(usize, String, String)> {
        let a = &self.modules[from].path;
        let b = &self.modules[to].path;
        let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        if common == a.len() || common == b.len() {
            return None;
        }
        let mut parent = from;
        for _ in common..a.len() {
            parent = self.parent_of(parent)?;
        }
        Some((parent, a[common].clone(), b[common].clone()))
    }

    /// Sibling edges, by parent module, one reference kept per edge.
    fn edges(&self) -> BTreeMap<usize, BTreeMap<(String, String), Edge>> {
        let mut out: BTreeMap<usize, BTreeMap<(String, String), Edge>> = BTreeMap::new();
        for (id, module) in self.modules.iter().enumerate() {
            for r in &module.references {
                let Some((start, rest)) = self.start(id, &r.path, MAX_HOPS) else {
                    continue;
                };
                let target = self.walk(start, &rest, MAX_HOPS);
                let Some((parent, from, to)) = self.lift(id, target) else {
                    continue;
                };
                out.entry(parent)
                    .or_default()
                    .entry((from.clone(), to.clone()))
                    .or_insert_with(|| Edge {
                        from,
                        to,
                        file: r.file.clone(),
                        line: r.line,
                        named: r.path.join("::"),
                    });
            }
        }
        out
    }

    /// Every import cycle among siblings, parents in tree order.
    pub fn cycles(&self) -> Vec<Cycle> {
        let mut out = Vec::new();
        for (parent, edges) in self.edges() {
            let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
            for (from, to) in edges.keys() {
                next.entry(from).or_default().insert(to);
            }
            let mut done: BTreeSet<&str> = BTreeSet::new();
            for &node in next.keys() {
                if done.contains(node) {
                    continue;
                }
                let forward = reachable(&next, node);
                let members: Vec<&str> = forward
                    .iter()
                    .copied()
                    .filter(|&other| other == node || reachable(&next, other).contains(node))
                    .collect();
                done.extend(members.iter().copied());
                if members.len() < 2 {
                    continue;
                }
                let inside: BTreeSet<&str> = members.iter().copied().collect();
                let path = shortest_cycle(&next, &inside, node);
                let parent_path = &self.modules[parent].path;
                out.push(Cycle {
                    root: self.root.clone(),
                    parent: std::iter::once("crate")
                        .chain(parent_path.iter().map(String::as_str))
                        .collect::<Vec<_>>()
                        .join("::"),
                    path: path.into_iter().map(str::to_owned).collect(),
                    members: members.iter().map(|&m| m.to_owned()).collect(),
                    edges: edges
                        .values()
                        .filter(|e| {
                            inside.contains(e.from.as_str()) && inside.contains(e.to.as_str())
                        })
                        .cloned()
                        .collect(),
                });
            }
        }
        out
    }
}

/// Every node reachable from `start` (itself included).
fn reachable<'a>(next: &BTreeMap<&'a str, BTreeSet<&'a str>>, start: &'a str) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::from([start]);
    let mut stack = vec![start];
    while let Some(n) = stack.pop() {
        for &m in next.get(n).into_iter().flatten() {
            if seen.insert(m) {
                stack.push(m);
            }
        }
    }
    seen
}

/// A shortest cycle from `start` back to it inside `inside` (breadth-first), as
/// `[start, …, start]`.
fn shortest_cycle<'a>(
    next: &BTreeMap<&'a str, BTreeSet<&'a str>>,
    inside: &BTreeSet<&'a str>,
    start: &'a str,
) -> Vec<&'a str> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(n) = queue.pop_front() {
        for &m in next.get(n).into_iter().flatten() {
            if m == start {
                let mut path = vec![start, n];
                let mut cur = n;
                while let Some(&p) = came_from.get(cur) {
                    path.push(p);
                    cur = p;
                }
                path.reverse();
                return path;
            }
            if inside.contains(m) && m != start && !came_from.contains_key(m) {
                came_from.insert(m, n);
                queue.push_back(m);
            }
        }
    }
    vec![start]
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    use super::*;

    fn tree(files: &[(&str, &str)]) -> ModuleTree {
        let files: BTreeMap<PathBuf, String> = files
            .iter()
            .map(|(p, s)| (PathBuf::from(p), (*s).to_owned()))
            .collect();
        ModuleTree::load(Path::new("src/lib.rs"), &files)
    }

    fn cycle_paths(tree: &ModuleTree) -> Vec<String> {
        tree.cycles()
            .iter()
            .map(|c| format!("{}: {}", c.parent, c.path.join(" → ")))
            .collect()
    }

    #[test]
    fn siblings_importing_each_other_are_a_cycle_with_its_references() {
        let t = tree(&[
            ("src/lib.rs", "mod a;\nmod b;\nmod c;"),
            ("src/a.rs", "use crate::b::B;\npub struct A;"),
            ("src/b.rs", "pub struct B;\nfn f() { let _ = crate::c::C; }"),
            ("src/c.rs", "pub struct C;\n\nuse super::a::A;"),
        ]);
        let cycles = t.cycles();
        assert_eq!(cycle_paths(&t), ["crate: a → b → c → a"]);
        let report = cycles[0].to_string();
        assert!(
            report.contains("a → b: src/a.rs:1 names crate::b::B"),
            "{report}"
        );
        assert!(
            report.contains("b → c: src/b.rs:2 names crate::c::C"),
            "{report}"
        );
        assert!(
            report.contains("c → a: src/c.rs:3 names super::a::A"),
            "{report}"
        );
    }

    #[test]
    fn parent_and_children_may_name_each_other() {
        // The parent re-exports a child's type and defines one the child uses; a
        // grandchild names the crate root's item; a child names its own child.
        let t = tree(&[
            (
                "src/lib.rs",
                "mod session;\npub use session::Session;\npub struct Error;",
            ),
            (
                "src/session/mod.rs",
                "mod config;\nmod core;\npub use config::Config;\npub use self::core::Core;\n\
                 pub struct Frame;\n#[cfg(test)]\nmod tests { use super::*; }",
            ),
            (
                "src/session/config.rs",
                "use super::Frame;\nuse crate::Error;\npub struct Config;",
            ),
            (
                "src/session/core.rs",
                "use super::{Config, Frame};\npub struct Core;",
            ),
        ]);
        assert_eq!(cycle_paths(&t), Vec::<String>::new());
    }

    #[test]
    fn cycles_are_found_at_every_depth_and_through_re_exports() {
        let t = tree(&[
            (
                "src/lib.rs",
                "pub mod endpoint;\nmod conn;\npub use endpoint::Endpoint;",
            ),
            (
                "src/endpoint.rs",
                "pub struct Endpoint;\nuse crate::conn::Conn;",
            ),
            ("src/conn.rs", "pub struct Conn { e: crate::Endpoint }"),
            ("src/session/mod.rs", ""),
        ]);
        assert_eq!(cycle_paths(&t), ["crate: conn → endpoint → conn"]);

        let t = tree(&[
            ("src/lib.rs", "mod session;"),
            (
                "src/session/mod.rs",
                "mod verifier;\nmod recording;\npub use recording::*;",
            ),
            (
                "src/session/verifier.rs",
                "use super::Recorder;\npub struct Verifier;",
            ),
            (
                "src/session/recording.rs",
                "pub struct Recorder;\nfn f(v: super::verifier::Verifier) {}",
            ),
        ]);
        assert_eq!(
            cycle_paths(&t),
            ["crate::session: recording → verifier → recording"]
        );
    }

    #[test]
    fn an_acyclic_tree_passes_and_a_mutual_pair_inside_a_child_is_lifted() {
        let t = tree(&[
            ("src/lib.rs", "mod model;\nmod core;\nmod runtime;"),
            ("src/model.rs", "pub struct Key;"),
            ("src/core/mod.rs", "mod login;\nuse crate::model::Key;"),
            ("src/core/login.rs", "use crate::model::Key;"),
            (
                "src/runtime.rs",
                "use crate::core::login;\nuse crate::model::*;",
            ),
        ]);
        assert_eq!(cycle_paths(&t), Vec::<String>::new());

        // A deep module naming a sibling of its ancestor is an edge between the
        // ancestors: model → core here closes core → model.
        let t = tree(&[
            ("src/lib.rs", "mod model;\nmod core;"),
            ("src/model/mod.rs", "mod keys;"),
            ("src/model/keys.rs", "fn f() { crate::core::login::go(); }"),
            ("src/core/mod.rs", "mod login;"),
            (
                "src/core/login.rs",
                "use crate::model::keys;\npub fn go() {}",
            ),
        ]);
        assert_eq!(cycle_paths(&t), ["crate: core → model → core"]);
    }
}
