//! Petrel's tokio runtime for reliable UDP: `Endpoint` and `Connection`.
//!
//! A thin layer over the sans-IO state machines of `petrel-proto`: it owns the UDP
//! socket, routes datagrams to connections, sleeps until each connection's next
//! deadline, and exposes an async message API.
