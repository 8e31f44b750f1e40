//! Command lines as a shell would accept them.

/// A command line as a shell would accept it: arguments with characters
/// outside a safe set are single-quoted.
pub(super) fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let safe = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+".contains(c));
            if safe {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quoting() {
        let argv = ["petrel", "bench", "--x", "a b", "it's", ""].map(str::to_owned);
        assert_eq!(shell_line(&argv), r"petrel bench --x 'a b' 'it'\''s' ''");
    }
}
