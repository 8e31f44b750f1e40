//! The echo benchmark (`benchmark` = `"echo"`, `specs/benchmarks.md` §A):
//! its parameters, the figures of one round, and its error counters.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::endpoint_io::EndpointIo;
use super::Percentiles;

/// Error counters of one round (or summed over rounds). Every kind counts
/// against `ok`.
///
/// One fault can show in several counters: an echo that fails verification
/// never frees its slot, so its message is also `lost`/`unfinished` at the
/// end and its client usually reports a drain timeout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EchoErrors {
    /// Echoes failing length, magic, phase or body verification.
    pub content: u64,
    /// Echoes arriving after an echo with a higher sequence (reordering).
    pub order: u64,
    /// Valid echoes for another client, or for a sequence not in flight
    /// (duplicates).
    pub unexpected: u64,
    /// `send` calls that failed.
    pub send: u64,
    /// Clients whose `recv` failed (connection closed or reset).
    pub disconnects: u64,
    /// Clients still waiting for echoes when the drain limit expired.
    pub drain_timeouts: u64,
    /// Unreliable transports: messages never echoed.
    pub lost: u64,
    /// Reliable transports: messages still outstanding at the end.
    pub unfinished: u64,
    /// Server-side receive/send/framing failures.
    pub server: u64,
}

impl EchoErrors {
    /// Sum of every kind.
    pub fn total(&self) -> u64 {
        self.by_kind().values().sum()
    }

    /// The counters by kind name, as recorded in
    /// [`ResultRecord::errors`](super::ResultRecord::errors).
    pub fn by_kind(&self) -> BTreeMap<String, u64> {
        [
            ("content", self.content),
            ("order", self.order),
            ("unexpected", self.unexpected),
            ("send", self.send),
            ("disconnects", self.disconnects),
            ("drain_timeouts", self.drain_timeouts),
            ("lost", self.lost),
            ("unfinished", self.unfinished),
            ("server", self.server),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// Adds another round's counters.
    pub(crate) fn add(&mut self, o: &EchoErrors) {
        self.content += o.content;
        self.order += o.order;
        self.unexpected += o.unexpected;
        self.send += o.send;
        self.disconnects += o.disconnects;
        self.drain_timeouts += o.drain_timeouts;
        self.lost += o.lost;
        self.unfinished += o.unfinished;
        self.server += o.server;
    }
}

/// Figures of one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EchoRound {
    /// Round index, from 0.
    pub round: u32,
    /// Messages submitted (warm-up and measured).
    pub sent: u64,
    /// Verified echoes of warm-up messages.
    pub warmup_round_trips: u64,
    /// Verified echoes of messages submitted in the measured interval.
    pub round_trips: u64,
    /// Measured interval (s).
    pub measured_s: f64,
    /// Time from the end of the measured interval until the last client
    /// finished draining (s), at most the drain limit.
    pub drain_s: f64,
    /// `round_trips / (measured_s + drain_s)` (round trips/s).
    pub round_trips_per_sec: f64,
    /// RTT from submission to verified echo of measured messages (µs).
    pub rtt: Percentiles,
    /// Process CPU over the measured interval (%; 100 = one core).
    pub cpu_percent: Option<f64>,
    /// Messages the server echoed.
    pub server_echoed: u64,
    /// Error counters.
    pub errors: EchoErrors,
    /// The server endpoint's I/O counters over the round, warm-up included (Petrel
    /// RUDP only; messages = 2 × echoes: each is one message in and one out).
    pub server_io: Option<EndpointIo>,
}

/// Every parameter of an echo run, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EchoParameters {
    /// Transport (`--protocol`).
    pub protocol: String,
    /// Message size including header (bytes).
    pub payload: usize,
    /// Clients.
    pub clients: usize,
    /// Messages in flight per client.
    pub window: usize,
    /// Warm-up (s).
    pub warmup_s: f64,
    /// Measured interval (s).
    pub seconds: f64,
    /// Drain limit (s).
    pub drain_limit_s: f64,
    /// Rounds.
    pub rounds: u32,
    /// Tokio runtime flavour: `"current_thread"` or `"multi_thread"`.
    pub runtime: String,
    /// Tokio worker threads.
    pub runtime_workers: usize,
    /// Whether leftovers count as unfinished (reliable) or lost.
    pub reliable: bool,
    /// Third-party library under test and its version, e.g. `"quinn 0.11.12"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// Runtime layout (`--io-model`): `shared` = every task on the one runtime
    /// above; `sharded` = the server and the harness's timing on that
    /// (current-thread) runtime, the clients (sockets, connection tasks and the
    /// harness's per-client send and receive tasks) on `shards` single-thread
    /// runtimes, dealt out round-robin.
    #[serde(default)]
    pub io_model: EchoIoModel,
    /// Single-thread client runtimes of the `sharded` model (0 when `shared`).
    #[serde(default)]
    pub shards: usize,
    /// Server work rounds per echo (`--work`): chained SHA-256 digests over
    /// the whole message, before it is echoed unchanged.
    #[serde(default)]
    pub work: u32,
}

/// The runtime layout of an echo run (`--io-model`, `specs/benchmarks.md` §A).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EchoIoModel {
    /// One runtime (current-thread, or multi-thread with `runtime_workers`)
    /// runs the server, the clients and the harness.
    #[default]
    Shared,
    /// The clients on single-thread shard runtimes (see `io_model`).
    Sharded,
}

/// The TLS session of the `tls` and `wss` protocols, as the first client
/// negotiated it (recorded as `parameters.tls`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsSession {
    /// Protocol version, e.g. `"TLSv1_3"`.
    pub version: String,
    /// Cipher suite, e.g. `"TLS13_AES_256_GCM_SHA384"`.
    pub cipher_suite: String,
    /// The TLS library and its version, e.g. `"rustls 0.23.46"`.
    pub library: String,
    /// The server certificate: self-signed, generated in-process.
    pub certificate: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_kinds_sum_and_name() {
        let e = EchoErrors {
            content: 1,
            lost: 2,
            server: 3,
            ..Default::default()
        };
        assert_eq!(e.total(), 6);
        let m = e.by_kind();
        assert_eq!(m.len(), 9);
        assert_eq!(m["lost"], 2);
    }
}
