//! Which database a store location names, and how to print it safely.

/// The database a store location names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Embedded SQLite file (the default).
    Sqlite,
    /// PostgreSQL server.
    Postgres,
}

impl Backend {
    /// The backend a location names: `postgres://` or `postgresql://` URLs
    /// are PostgreSQL; `sqlite:` URLs and plain file paths are SQLite. The
    /// scheme is matched in any case (RFC 3986 §3.1: schemes are
    /// case-insensitive), so `POSTGRES://` is never taken for a file name.
    pub fn of(location: &str) -> Self {
        if has_scheme(location, "postgres://") || has_scheme(location, "postgresql://") {
            Self::Postgres
        } else {
            Self::Sqlite
        }
    }
}

/// Whether `location` starts with `scheme` (lowercase), ignoring ASCII case.
/// (The URL parser lowercases the scheme itself, so a match parses as one.)
pub(crate) fn has_scheme(location: &str, scheme: &str) -> bool {
    location
        .get(..scheme.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(scheme))
}

/// `location` with any URL password replaced by `***`, for logs, errors and
/// metrics: the password of the user info, and the value of every query
/// parameter whose name contains `pass` (`?password=…`, which the PostgreSQL
/// client accepts too). Works on malformed URLs (an unescaped `/`, `@`, `?`
/// or `#` in the password), erring towards hiding more: the user info ends
/// at the last `@` of the whole location.
pub fn redact(location: &str) -> String {
    let Some(scheme_end) = location.find("://") else {
        return location.to_owned();
    };
    let rest_start = scheme_end + 3;
    let rest = &location[rest_start..];
    let mut out = location[..rest_start].to_owned();
    let mut tail = rest;
    if let Some(at) = rest.rfind('@') {
        // A `:` after a `/`, `?` or `#` belongs to the path or query, not to
        // the user info (e.g. `host/db?x=a:b@c`).
        let colon = rest[..at].find(':');
        if let Some(colon) = colon.filter(|&c| !rest[..c].contains(['/', '?', '#'])) {
            out.push_str(&rest[..=colon]);
            out.push_str("***");
            tail = &rest[at..];
        }
    }
    match tail.split_once('?') {
        Some((before, query)) => {
            out.push_str(before);
            out.push('?');
            let params: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if k.to_ascii_lowercase().contains("pass") => format!("{k}=***"),
                    _ => kv.to_owned(),
                })
                .collect();
            out.push_str(&params.join("&"));
        }
        None => out.push_str(tail),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_follows_the_scheme() {
        assert_eq!(Backend::of("postgres://h/db"), Backend::Postgres);
        assert_eq!(Backend::of("postgresql://h/db"), Backend::Postgres);
        assert_eq!(Backend::of("sqlite://x.db"), Backend::Sqlite);
        assert_eq!(Backend::of("petrel-reflector.db"), Backend::Sqlite);
        assert_eq!(Backend::of("postgres.db"), Backend::Sqlite);
        // Found by the adversarial review: an upper- or mixed-case scheme
        // was taken for a SQLite file name.
        assert_eq!(Backend::of("POSTGRES://h/db"), Backend::Postgres);
        assert_eq!(Backend::of("PostgreSQL://h/db"), Backend::Postgres);
        assert_eq!(Backend::of("Postgres:/h/db"), Backend::Sqlite);
        assert_eq!(Backend::of("é"), Backend::Sqlite);
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://petrel:s3cr%40t@127.0.0.1:5432/db?sslmode=disable"),
            "postgres://petrel:***@127.0.0.1:5432/db?sslmode=disable"
        );
        assert_eq!(redact("postgres://u:p@w@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("postgres://u:pa/ss@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("postgres://h/db?x=a:b@c"), "postgres://h/db?x=a:b@c");
        assert_eq!(redact("postgres://u:p@"), "postgres://u:***@");
        assert_eq!(redact("/var/lib/a:b@c.db"), "/var/lib/a:b@c.db");
        // Found by the adversarial review: a password in the query, or with `?`
        // or `#` in it, was printed in full.
        assert_eq!(
            redact("postgres://u@h:1/x?sslmode=disable&password=secret"),
            "postgres://u@h:1/x?sslmode=disable&password=***"
        );
        assert_eq!(redact("postgres://u:sec?ret@h/x"), "postgres://u:***@h/x");
        assert_eq!(redact("postgres://u:sec#ret@h/x"), "postgres://u:***@h/x");
        assert_eq!(
            redact("postgres://u:a@h/x?sslpassword=k"),
            "postgres://u:***@h/x?sslpassword=***"
        );
    }
}
