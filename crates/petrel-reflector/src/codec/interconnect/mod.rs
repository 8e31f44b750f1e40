//! The interconnect data plane's wire formats (draarl-interconnect §4,
//! draarl-v1 §6.3): the HMAC-signed Type 0 envelope, the relay payload of
//! RelayUpstream/RelayDownstream and the rules for its inner packet, and
//! the DataBind messages of the address binding; and the control plane's
//! framing (§3.1: length + JSON, [`ControlMessage`], `type0` wrapping) and
//! feature negotiation (§3.2). Pure functions over byte slices; every
//! length is checked before anything is allocated.
//!
//! ```text
//!  datagram ──peek──▶ Shape{source, session}      (§4.3 step 1: "is it Type 0?")
//!           ──open(key)──▶ Envelope{header, payload}   (§4.1 checks, §4.2 tag, hop ≤ 2)
//!                            ├─ 0x30/0x31 ──RelayFrame::parse──▶ {session, epoch, domain, …, inner}
//!                            │                                    └─check_inner / inner_matches_route
//!                            └─ 0x06 ──DataBind::parse──▶ Request | Challenge | Proof
//!  EnvelopeHeader + payload ──seal(key)──▶ datagram
//! ```

mod control_frame;
mod control_message;
mod data_bind;
mod envelope;
mod features;
pub mod messages;
mod node_id;
mod node_key;
mod relay;
mod relay_inner;

#[cfg(test)]
mod control_tests;
#[cfg(test)]
mod tests;

pub use control_frame::{
    encode_frame, FrameError, FrameReader, MAX_CONTROL_FRAME, MAX_HELLO_FRAME,
};
pub use control_message::{kind, ControlMessage, Type0Error};
pub use data_bind::{Challenge, DataBind, DataBindError, CHALLENGE_LEN};
pub use envelope::{
    is_expired, is_truncated_envelope, open, peek, peek_message_id, seal, seal_into, Channel,
    Envelope, EnvelopeError, EnvelopeHeader, Flags, SealError, Shape, Subtype, ENVELOPE_MAGIC,
    ENVELOPE_OVERHEAD, MAX_HOP_COUNT, NODE_MAGIC, PROTOCOL_VERSION,
};
pub use features::{negotiate, Features, Negotiated, NegotiationError, Offer};
pub use node_id::{NodeId, NodeIdError, NODE_ID_LEN};
pub use node_key::{KeyError, NodeKey, MIN_KEY_LEN, TAG_LEN};
pub use relay::{
    RelayError, RelayFrame, RelayHeader, MAX_INNER_LEN, MIN_INNER_LEN, RELAY_HEADER_LEN,
};
pub use relay_inner::{check_inner, inner_matches_route, InnerError, InnerKind, RouteIdentity};
