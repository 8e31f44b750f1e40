//! The caller of an authenticated app route (`specs/draarl-apps.md` §1.1).
//!
//! The account side's Bearer middleware checks `Authorization: Bearer
//! <access token>`, the user's status and (for "approved" routes such as
//! `/api/radio/*`) the approval, answers every failure itself (401/403 with
//! the §1.1 messages), and on success inserts an [`AuthenticatedUser`]
//! into the request's extensions. The radio routes read it; a request that
//! reaches them without one is answered 401 `未提供认证令牌`.

use crate::model::AppUser;

/// The authenticated, approved caller, as an axum request extension:
/// `request.extensions_mut().insert(AuthenticatedUser(user))`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticatedUser(pub AppUser);

/// A request that carried the configured admin token, as an axum request
/// extension inserted by the HTTP guard (`http.rs`) before any route runs.
/// Routes open to both the admin token and admin accounts (the dashboard's
/// data) let such a request through without a Bearer JWT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdminTokenCaller;
