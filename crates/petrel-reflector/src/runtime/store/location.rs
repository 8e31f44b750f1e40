//! Connect options for a store location.

use std::path::Path;

use sqlx::any::AnyConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::ConnectOptions;

use crate::model::db_location::has_scheme;
use crate::model::Backend;

/// Connect options for `location`. A plain path becomes an absolute
/// `sqlite://` URL created on first open, so no file name is ever parsed as
/// a URL; `sqlite:` URLs are taken as written (add `?mode=rwc` to create).
pub(super) fn connect_options(location: &str) -> Result<AnyConnectOptions, sqlx::Error> {
    if Backend::of(location) == Backend::Postgres || has_scheme(location, "sqlite:") {
        return location.parse();
    }
    let path = std::path::absolute(Path::new(location)).map_err(sqlx::Error::Io)?;
    let url = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .to_url_lossy();
    AnyConnectOptions::from_url(&url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_schemes_are_case_insensitive() {
        let pg = connect_options("PostgreSQL://u:p@127.0.0.1:5432/db").unwrap();
        assert!(
            pg.database_url.as_str().starts_with("postgresql://"),
            "{}",
            pg.database_url
        );
        let lite = connect_options("SQLite::memory:").unwrap();
        assert!(
            lite.database_url.as_str().starts_with("sqlite:"),
            "{}",
            lite.database_url
        );
    }

    #[test]
    fn plain_paths_become_absolute_sqlite_urls() {
        let opts = connect_options("dir with space/x?.db").unwrap();
        let url = opts.database_url.as_str();
        assert!(url.starts_with("sqlite:///"), "{url}");
        assert!(url.contains("mode=rwc"), "{url}");
        let back = SqliteConnectOptions::from_url(&opts.database_url).unwrap();
        assert!(back
            .get_filename()
            .ends_with(Path::new("dir with space/x?.db")));
    }
}
