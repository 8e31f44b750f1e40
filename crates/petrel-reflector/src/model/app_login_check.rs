//! One app login waiting for the account store, as the core emits it and
//! the runtime answers it (`specs/draarl-apps.md` §2.2 steps 4–6).

use super::app_login::AppAuthRequest;

/// A Type 1 login for the runtime to hand to its
/// [`AppAuthority`](crate::runtime::app_authority::AppAuthority) and answer
/// with [`Reflector::handle_app_login`](crate::core::Reflector::handle_app_login)
/// under the same `id`. Its `Debug` output hides the token.
#[derive(Debug, Clone)]
pub struct AppLoginCheck {
    /// Numbered per shard; the answer goes back to the shard that emitted it.
    pub id: u64,
    /// What to authorise.
    pub request: AppAuthRequest,
}
