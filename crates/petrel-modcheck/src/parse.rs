//! What one source file says about its module: the child modules it declares (in
//! other files or inline), the names of the items it defines, its `use`
//! declarations (aliases and globs), and every path it names through `crate::`,
//! `super::` or `self::` — in `use` declarations and in code.

use std::collections::BTreeSet;

use crate::lexer::{tokens, Token};

/// A path as written: segments from the first (`crate`, `super`, `self` or a name).
pub(crate) type RawPath = Vec<String>;

/// A path named in a module, with the line it is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mention {
    pub path: RawPath,
    pub line: usize,
}

/// A child module declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChildDecl {
    /// `mod name;`: the body is in `name.rs` or `name/mod.rs`.
    File { name: String, line: usize },
    /// `mod name { … }`: the body is inline.
    Inline { name: String, facts: ModuleFacts },
}

/// The facts of one module body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ModuleFacts {
    pub children: Vec<ChildDecl>,
    /// Names of items defined at module level (functions, types, traits, constants,
    /// statics, macros).
    pub items: BTreeSet<String>,
    /// Module-level `use` leaves: the name they bind and the path they name.
    pub imports: Vec<(String, RawPath)>,
    /// Module-level glob imports (`use path::*`).
    pub globs: Vec<RawPath>,
    /// Every path through `crate`, `super` or `self`, and every `use` leaf.
    pub mentions: Vec<Mention>,
}

/// The facts of a file's module.
pub(crate) fn parse(source: &str) -> ModuleFacts {
    let toks = tokens(source);
    let mut i = 0;
    module_body(&toks, &mut i, false)
}

/// Keywords whose next identifier names a module-level item.
const ITEM_KEYWORDS: [&str; 8] = [
    "fn", "struct", "enum", "trait", "type", "const", "static", "union",
];

fn text(toks: &[Token], i: usize) -> &str {
    toks.get(i).map_or("", |t| t.text.as_str())
}

/// Parses tokens from `i` up to the end, or (`inline`) up to the `}` closing the
/// module, which is consumed.
fn module_body(toks: &[Token], i: &mut usize, inline: bool) -> ModuleFacts {
    let mut facts = ModuleFacts::default();
    let mut depth = 0usize;
    while let Some(tok) = toks.get(*i) {
        match tok.text.as_str() {
            "{" => depth += 1,
            "}" if depth == 0 && inline => {
                *i += 1;
                return facts;
            }
            "}" => depth = depth.saturating_sub(1),
            "mod" if depth == 0 && toks.get(*i + 1).is_some_and(Token::is_ident) => {
                let name = text(toks, *i + 1).to_owned();
                match text(toks, *i + 2) {
                    ";" => {
                        facts.children.push(ChildDecl::File {
                            name,
                            line: tok.line,
                        });
                        *i += 3;
                        continue;
                    }
                    "{" => {
                        *i += 3;
                        let inner = module_body(toks, i, true);
                        facts
                            .children
                            .push(ChildDecl::Inline { name, facts: inner });
                        continue;
                    }
                    _ => {}
                }
            }
            "use" if text(toks, *i + 1) != "<" => {
                let line = tok.line;
                *i += 1;
                let mut leaves = Vec::new();
                use_tree(toks, i, Vec::new(), &mut leaves);
                for leaf in leaves {
                    if depth == 0 {
                        match &leaf.alias {
                            _ if leaf.glob => facts.globs.push(leaf.path.clone()),
                            Some(alias) => facts.imports.push((alias.clone(), leaf.path.clone())),
                            None => {}
                        }
                    }
                    facts.mentions.push(Mention {
                        path: leaf.path,
                        line,
                    });
                }
                continue;
            }
            "macro_rules"
                if depth == 0
                    && text(toks, *i + 1) == "!"
                    && toks.get(*i + 2).is_some_and(Token::is_ident) =>
            {
                facts.items.insert(text(toks, *i + 2).to_owned());
            }
            kw if depth == 0 && ITEM_KEYWORDS.contains(&kw) => {
                let mut j = *i + 1;
                if text(toks, j) == "mut" {
                    j += 1;
                }
                let name = text(toks, j);
                let is_name = toks.get(j).is_some_and(Token::is_ident)
                    && !matches!(name, "fn" | "unsafe" | "async" | "extern");
                if is_name {
                    facts.items.insert(name.to_owned());
                }
            }
            "crate" | "super" | "self" if starts_path(toks, *i) => {
                let line = tok.line;
                let mut path = vec![tok.text.clone()];
                let mut j = *i + 1;
                while text(toks, j) == "::" && toks.get(j + 1).is_some_and(Token::is_ident) {
                    path.push(text(toks, j + 1).to_owned());
                    j += 2;
                }
                facts.mentions.push(Mention { path, line });
                *i = j;
                continue;
            }
            _ => {}
        }
        *i += 1;
    }
    facts
}

/// Whether the `crate`/`super`/`self` at `i` begins a path in code: followed by
/// `::`, and not itself a later segment, `$crate` in a macro, or a visibility
/// (`pub(in crate::x)`).
fn starts_path(toks: &[Token], i: usize) -> bool {
    let prev = if i == 0 { "" } else { text(toks, i - 1) };
    text(toks, i + 1) == "::" && !matches!(prev, "::" | "$" | "in")
}

/// One leaf of a `use` tree.
#[derive(Debug)]
struct UseLeaf {
    path: RawPath,
    /// The name it binds (`None` for `as _`).
    alias: Option<String>,
    glob: bool,
}

/// Parses a `use` tree from `i` with `prefix` already read; stops before the `,`,
/// `}` or `;` that ends it.
fn use_tree(toks: &[Token], i: &mut usize, prefix: RawPath, out: &mut Vec<UseLeaf>) {
    let mut segs = prefix;
    loop {
        let Some(tok) = toks.get(*i) else { return };
        match tok.text.as_str() {
            "::" => *i += 1,
            "{" => {
                *i += 1;
                loop {
                    match text(toks, *i) {
                        "}" => {
                            *i += 1;
                            return;
                        }
                        "," => *i += 1,
                        "" | ";" => return,
                        _ => {
                            let before = *i;
                            use_tree(toks, i, segs.clone(), out);
                            if *i == before {
                                // Not a use tree: give up on this declaration.
                                return;
                            }
                        }
                    }
                }
            }
            "*" => {
                *i += 1;
                out.push(UseLeaf {
                    path: segs,
                    alias: None,
                    glob: true,
                });
                return;
            }
            _ if tok.is_ident() => {
                segs.push(tok.text.clone());
                *i += 1;
                if text(toks, *i) == "::" {
                    continue;
                }
                if segs.last().is_some_and(|s| s == "self") && segs.len() > 1 {
                    segs.pop();
                }
                let mut alias = segs.last().cloned();
                if text(toks, *i) == "as" {
                    let name = text(toks, *i + 1);
                    alias = (name != "_").then(|| name.to_owned());
                    *i += 2;
                }
                out.push(UseLeaf {
                    path: segs,
                    alias,
                    glob: false,
                });
                return;
            }
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(facts: &ModuleFacts) -> Vec<String> {
        facts.mentions.iter().map(|m| m.path.join("::")).collect()
    }

    #[test]
    fn use_trees_give_leaves_aliases_and_globs() {
        let facts = parse(
            "pub use crate::{a::{self, B as C}, b::*};\nuse super::super::d::E;\nuse std::fmt;",
        );
        assert_eq!(
            paths(&facts),
            [
                "crate::a",
                "crate::a::B",
                "crate::b",
                "super::super::d::E",
                "std::fmt"
            ]
        );
        let aliases: Vec<&str> = facts.imports.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(aliases, ["a", "C", "E", "fmt"]);
        assert_eq!(facts.globs, [vec!["crate".to_owned(), "b".to_owned()]]);
        assert_eq!(facts.mentions[3].line, 2);
    }

    #[test]
    fn modules_items_and_code_paths() {
        let facts = parse(
            "mod a;\npub(crate) mod b { use super::a::X; fn f() {} }\n\
             pub struct S; impl S { fn method() { crate::c::g(); self::a::h(); } }\n\
             pub(in crate::a) fn vis() {} macro_rules! m { () => { $crate::x::y!() } }\n\
             const fn k() {} static mut Z: u8 = 0;",
        );
        assert_eq!(facts.children.len(), 2);
        let ChildDecl::Inline { name, facts: inner } = &facts.children[1] else {
            panic!("b is inline");
        };
        assert_eq!(name, "b");
        assert_eq!(paths(inner), ["super::a::X"]);
        assert!(inner.items.contains("f"));
        let items: Vec<&str> = facts.items.iter().map(String::as_str).collect();
        assert_eq!(items, ["S", "Z", "k", "m", "vis"]);
        assert_eq!(paths(&facts), ["crate::c::g", "self::a::h"]);
    }
}
