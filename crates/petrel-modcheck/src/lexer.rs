//! Splits Rust source into the few tokens the checker reads — identifiers
//! (keywords included), `::` and single punctuation characters — with their line
//! numbers. Comments (doc comments included), string, byte-string and character
//! literals, lifetimes and numbers are skipped, so a path inside a comment or a
//! string is not an import.

/// One token and the 1-based line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    /// An identifier (`r#` stripped), `::`, or one punctuation character.
    pub text: String,
    /// Line number, from 1.
    pub line: usize,
}

impl Token {
    pub(crate) fn is_ident(&self) -> bool {
        self.text
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
    }
}

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_ident_continue(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The tokens of `source`.
pub(crate) fn tokens(source: &str) -> Vec<Token> {
    let chars: Vec<char> = source.chars().collect();
    let mut lexer = Lexer {
        chars: &chars,
        pos: 0,
        line: 1,
        out: Vec::new(),
    };
    lexer.run();
    lexer.out
}

struct Lexer<'a> {
    chars: &'a [char],
    pos: usize,
    line: usize,
    out: Vec<Token>,
}

impl Lexer<'_> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    /// Moves past one character, counting lines.
    fn bump(&mut self) {
        if self.peek(0) == Some('\n') {
            self.line += 1;
        }
        self.pos += 1;
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                '/' if self.peek(1) == Some('/') => self.line_comment(),
                '/' if self.peek(1) == Some('*') => self.block_comment(),
                '"' => self.string(),
                '\'' => self.quote(),
                'r' | 'b' | 'c' if self.raw_or_byte_literal() => {}
                c if is_ident_start(c) => self.ident(),
                c if c.is_ascii_digit() => self.number(),
                ':' if self.peek(1) == Some(':') => {
                    self.push("::".to_owned());
                    self.pos += 2;
                }
                c if c.is_whitespace() => self.bump(),
                c => {
                    self.push(c.to_string());
                    self.pos += 1;
                }
            }
        }
    }

    fn push(&mut self, text: String) {
        self.out.push(Token {
            text,
            line: self.line,
        });
    }

    fn line_comment(&mut self) {
        while self.peek(0).is_some_and(|c| c != '\n') {
            self.pos += 1;
        }
    }

    fn block_comment(&mut self) {
        let mut depth = 0usize;
        while let Some(c) = self.peek(0) {
            if c == '/' && self.peek(1) == Some('*') {
                depth += 1;
                self.pos += 2;
            } else if c == '*' && self.peek(1) == Some('/') {
                depth -= 1;
                self.pos += 2;
                if depth == 0 {
                    return;
                }
            } else {
                self.bump();
            }
        }
    }

    /// A `"…"` literal with escapes, the opening quote at `pos`.
    fn string(&mut self) {
        self.pos += 1;
        while let Some(c) = self.peek(0) {
            match c {
                '\\' => {
                    self.pos += 1;
                    self.bump();
                }
                '"' => {
                    self.pos += 1;
                    return;
                }
                _ => self.bump(),
            }
        }
    }

    /// A raw string `r#…#"…"#…#` with `hashes` hashes, `pos` on the opening quote.
    fn raw_string(&mut self, hashes: usize) {
        self.pos += 1;
        while let Some(c) = self.peek(0) {
            if c == '"' && (1..=hashes).all(|i| self.peek(i) == Some('#')) {
                self.pos += 1 + hashes;
                return;
            }
            self.bump();
        }
    }

    /// `b"…"`, `b'…'`, `c"…"`, `r"…"`, `r#"…"#`, `br#"…"#` and raw identifiers
    /// `r#name`; false (nothing consumed) when `pos` starts an ordinary identifier.
    fn raw_or_byte_literal(&mut self) -> bool {
        let c = self.peek(0);
        let prefix = match (c, self.peek(1)) {
            (Some('b'), Some('r')) => 2,
            (Some('b' | 'c'), Some('"')) => {
                self.pos += 1;
                self.string();
                return true;
            }
            (Some('b'), Some('\'')) => {
                self.pos += 1;
                self.quote();
                return true;
            }
            (Some('r'), _) => 1,
            _ => return false,
        };
        let mut hashes = 0;
        while self.peek(prefix + hashes) == Some('#') {
            hashes += 1;
        }
        match self.peek(prefix + hashes) {
            Some('"') => {
                self.pos += prefix + hashes;
                self.raw_string(hashes);
                true
            }
            Some(c) if prefix == 1 && hashes == 1 && is_ident_start(c) => {
                // A raw identifier: keep the name without `r#`.
                self.pos += 2;
                self.ident();
                true
            }
            _ => false,
        }
    }

    /// A character literal (`'a'`, `'\n'`, `'\u{1F600}'`) or a lifetime (`'a`).
    fn quote(&mut self) {
        self.pos += 1;
        match (self.peek(0), self.peek(1)) {
            (Some('\\'), _) => {
                while self.peek(0).is_some_and(|c| c != '\'') {
                    if self.peek(0) == Some('\\') {
                        self.pos += 1;
                    }
                    self.bump();
                }
                self.pos += 1;
            }
            (Some(_), Some('\'')) => self.pos += 2,
            _ => {
                while self.peek(0).is_some_and(is_ident_continue) {
                    self.pos += 1;
                }
            }
        }
    }

    fn ident(&mut self) {
        let start = self.pos;
        while self.peek(0).is_some_and(is_ident_continue) {
            self.pos += 1;
        }
        let text: String = self.chars[start..self.pos].iter().collect();
        self.push(text);
    }

    fn number(&mut self) {
        while self.peek(0).is_some_and(|c| {
            is_ident_continue(c) || (c == '.' && self.peek(1).is_some_and(|d| d.is_ascii_digit()))
        }) {
            self.pos += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(source: &str) -> Vec<String> {
        tokens(source).into_iter().map(|t| t.text).collect()
    }

    #[test]
    fn comments_strings_and_chars_are_skipped() {
        let source =
            "use crate::a; // crate::xb\n/* crate::xc /* nested */ */ let s = \"crate::xd\";\n\
                      let r = r#\"crate::xe \"# ; let c = '\"'; let l: &'static str = x; b'\\''";
        let t = texts(source);
        let joined = t.join(" ");
        assert!(joined.starts_with("use crate :: a ;"));
        for hidden in ["xb", "xc", "xd", "xe"] {
            assert!(!t.iter().any(|x| x == hidden), "{hidden} leaked: {joined}");
        }
        assert!(joined.contains("l : & str = x"), "{joined}");
    }

    #[test]
    fn lines_and_raw_identifiers() {
        let t = tokens("a\n/* x\n y */ r#type::\n1.5e3 z");
        let lines: Vec<(String, usize)> = t.into_iter().map(|t| (t.text, t.line)).collect();
        assert_eq!(
            lines,
            [
                ("a".to_owned(), 1),
                ("type".to_owned(), 3),
                ("::".to_owned(), 3),
                ("z".to_owned(), 4)
            ]
        );
    }
}
