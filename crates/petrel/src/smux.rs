//! smux v1 stream multiplexing over one [`Connection`], as kcptun runs it over
//! kcp-go ([`Mode::KcpGo`](crate::Mode::KcpGo)).
//!
//! kcptun carries every TCP connection as a smux stream inside one KCP session,
//! so a Petrel program that talks to `kcptun-server`, or serves `kcptun-client`,
//! speaks smux on top of its connection. Written from smux's public description
//! (xtaci/smux `frame.go`, `session.go`, `stream.go`), protocol version 1
//! (kcptun's default `--smuxver 1`):
//!
//! - frame: `ver u8 (1) | cmd u8 | length u16 LE | stream id u32 LE`, then
//!   `length` payload bytes; cmd SYN 0 (open), FIN 1 (close), PSH 2 (data), NOP 3
//!   (keepalive);
//! - the frames form one byte stream: a KCP message may hold part of a frame or
//!   several frames (kcp-go runs KCP in stream mode). Each frame is sent here as
//!   one message, so frames from concurrent writers never interleave;
//! - a client numbers its streams 3, 5, 7, … and a server 2, 4, 6, …;
//! - after a stream's FIN the peer neither reads nor writes it (smux returns
//!   `io.EOF` on both), so a stream is closed, not half-closed, by [`SmuxStream::close`];
//! - version 1 has no per-stream flow control: when the application does not read
//!   a stream, the session stops reading the connection and KCP's receive window
//!   holds the sender back (smux's `MaxReceiveBuffer` does the same).
//!
//! Version 2 (window updates, `--smuxver 2`) is not spoken: a version-2 frame ends
//! the session with [`SmuxError::Protocol`].
//!
//! Bounds: [`SmuxConfig::max_streams`] open streams (a SYN beyond it is answered
//! with FIN and counted), [`SmuxConfig::stream_queue`] frames buffered per stream,
//! [`SmuxConfig::accept_backlog`] streams waiting for [`SmuxSession::accept`].
//!
//! Choice: written here rather than taken from a crates.io smux crate: v1 is the
//! handful of rules above, it runs over a Petrel [`Connection`] (messages, not an
//! `AsyncRead`/`AsyncWrite` byte stream a generic crate expects), and the interop
//! tests check it against the real kcptun binaries (`tests/interop_kcptun.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::connection_handle::Connection;
use crate::error::ConnectionError;

/// smux protocol version spoken here.
pub const SMUX_VERSION: u8 = 1;
/// Frame header length, bytes.
pub const FRAME_HEADER: usize = 8;
const CMD_SYN: u8 = 0;
const CMD_FIN: u8 = 1;
const CMD_PSH: u8 = 2;
const CMD_NOP: u8 = 3;

/// Configuration of a [`SmuxSession`]. `Default` is the documented default.
#[derive(Debug, Clone)]
pub struct SmuxConfig {
    /// A NOP frame is sent this often so the peer's smux keepalive timeout never
    /// fires on an idle session (smux's `KeepAliveInterval`, kcptun
    /// `--keepalive`). Default 10 s.
    pub keepalive_interval: Duration,
    /// Largest PSH payload sent, bytes (smux `MaxFrameSize`). Default 32 768;
    /// allowed 1..=65 535 (the length field is 16 bits).
    pub max_frame_size: usize,
    /// Frames buffered per stream before the session stops reading the
    /// connection, frames. Default 64.
    pub stream_queue: usize,
    /// Most streams open at once; a SYN beyond it is refused with FIN and
    /// counted. Default 1024.
    pub max_streams: usize,
    /// Streams the peer opened that wait for [`SmuxSession::accept`]; beyond it
    /// the session stops reading the connection. Default 1024 (smux's accept backlog).
    pub accept_backlog: usize,
}

impl Default for SmuxConfig {
    fn default() -> Self {
        Self {
            keepalive_interval: Duration::from_secs(10),
            max_frame_size: 32_768,
            stream_queue: 64,
            max_streams: 1024,
            accept_backlog: 1024,
        }
    }
}

/// Why a smux operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SmuxError {
    /// The connection below ended.
    #[error("connection: {0}")]
    Connection(#[from] ConnectionError),
    /// The peer broke the protocol (unknown version or command).
    #[error("smux protocol error: {0}")]
    Protocol(String),
    /// The stream was closed (by either side) or the session ended.
    #[error("stream closed")]
    Closed,
    /// [`SmuxSession::open`] would exceed [`SmuxConfig::max_streams`].
    #[error("the session already holds its maximum of {0} streams")]
    TooManyStreams(usize),
    /// An invalid [`SmuxConfig`] field.
    #[error("invalid smux configuration: {0}")]
    Config(String),
}

/// Counters of one session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SmuxStats {
    /// Frames received, by any stream.
    pub frames_received: u64,
    /// NOP frames received.
    pub nops_received: u64,
    /// Frames for a stream that is not open (closed already, or never opened), dropped.
    pub frames_unknown_stream: u64,
    /// SYNs refused because [`SmuxConfig::max_streams`] streams were open.
    pub streams_refused: u64,
}

/// Writes one frame into `out` (appended).
fn encode_frame(cmd: u8, sid: u32, payload: &[u8], out: &mut Vec<u8>) {
    out.push(SMUX_VERSION);
    out.push(cmd);
    // Callers keep payloads ≤ max_frame_size ≤ u16::MAX.
    out.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    out.extend_from_slice(&sid.to_le_bytes());
    out.extend_from_slice(payload);
}

/// What the reader task learnt from one frame.
#[derive(Debug, PartialEq, Eq)]
enum Frame {
    Syn(u32),
    Fin(u32),
    Psh(u32, Bytes),
    Nop,
}

/// Splits the next complete frame off `buf`; `Ok(None)` until one is complete.
fn next_frame(buf: &mut BytesMut) -> Result<Option<Frame>, SmuxError> {
    if buf.len() < FRAME_HEADER {
        return Ok(None);
    }
    let (ver, cmd) = (buf[0], buf[1]);
    let len = usize::from(u16::from_le_bytes([buf[2], buf[3]]));
    let sid = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
    if ver != SMUX_VERSION {
        return Err(SmuxError::Protocol(format!(
            "frame of version {ver}; this session speaks version {SMUX_VERSION}"
        )));
    }
    if buf.len() < FRAME_HEADER + len {
        return Ok(None);
    }
    buf.advance(FRAME_HEADER);
    let payload = buf.split_to(len).freeze();
    match cmd {
        CMD_SYN => Ok(Some(Frame::Syn(sid))),
        CMD_FIN => Ok(Some(Frame::Fin(sid))),
        CMD_PSH => Ok(Some(Frame::Psh(sid, payload))),
        CMD_NOP => Ok(Some(Frame::Nop)),
        other => Err(SmuxError::Protocol(format!(
            "unknown command {other} (stream {sid}, {len} bytes)"
        ))),
    }
}

/// State shared by the session's handles and its tasks.
#[derive(Debug)]
struct Shared {
    conn: Connection,
    config: SmuxConfig,
    state: Mutex<State>,
    frames_received: AtomicU64,
    nops_received: AtomicU64,
    frames_unknown_stream: AtomicU64,
    streams_refused: AtomicU64,
}

#[derive(Debug)]
struct State {
    /// Open streams: where the reader task delivers their payloads.
    streams: HashMap<u32, mpsc::Sender<Bytes>>,
    next_id: u32,
    /// Why the session ended, once it has.
    end: Option<SmuxError>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn send_frame(&self, cmd: u8, sid: u32, payload: &[u8]) -> Result<(), SmuxError> {
        let mut frame = Vec::with_capacity(FRAME_HEADER + payload.len());
        encode_frame(cmd, sid, payload, &mut frame);
        self.conn.send(Bytes::from(frame)).await?;
        Ok(())
    }

    /// Registers stream `sid`; `None` at the stream limit.
    fn register(&self, sid: u32) -> Option<mpsc::Receiver<Bytes>> {
        let mut st = self.lock();
        if st.streams.len() >= self.config.max_streams {
            return None;
        }
        let (tx, rx) = mpsc::channel(self.config.stream_queue);
        st.streams.insert(sid, tx);
        Some(rx)
    }

    fn end(&self, err: SmuxError) {
        let mut st = self.lock();
        st.end.get_or_insert(err);
        // Dropping the senders ends every stream's reads.
        st.streams.clear();
    }
}

/// Stops the session's tasks when the last handle (session or stream) is dropped.
#[derive(Debug)]
struct Guard {
    shared: Arc<Shared>,
    tasks: [JoinHandle<()>; 2],
}

impl Drop for Guard {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// One smux session over a [`Connection`]: opens and accepts [`SmuxStream`]s.
///
/// Must be created inside a tokio runtime (it spawns a reader and a keepalive
/// task, stopped when the session and all its streams are dropped).
#[derive(Debug)]
pub struct SmuxSession {
    guard: Arc<Guard>,
    accept_rx: tokio::sync::Mutex<mpsc::Receiver<SmuxStream>>,
}

impl SmuxSession {
    /// The client side (streams 3, 5, 7, …), as `kcptun-client` runs it.
    ///
    /// # Errors
    /// [`SmuxError::Config`] naming an invalid field.
    pub fn client(conn: Connection, config: SmuxConfig) -> Result<Self, SmuxError> {
        Self::new(conn, config, 1)
    }

    /// The server side (streams 2, 4, 6, …), as `kcptun-server` runs it.
    ///
    /// # Errors
    /// [`SmuxError::Config`] naming an invalid field.
    pub fn server(conn: Connection, config: SmuxConfig) -> Result<Self, SmuxError> {
        Self::new(conn, config, 0)
    }

    fn new(conn: Connection, config: SmuxConfig, first_id: u32) -> Result<Self, SmuxError> {
        if !(1..=usize::from(u16::MAX)).contains(&config.max_frame_size) {
            return Err(SmuxError::Config(format!(
                "max_frame_size = {} is outside 1..=65535 bytes",
                config.max_frame_size
            )));
        }
        for (name, value) in [
            ("stream_queue", config.stream_queue),
            ("max_streams", config.max_streams),
            ("accept_backlog", config.accept_backlog),
        ] {
            if value == 0 {
                return Err(SmuxError::Config(format!("{name} must be ≥ 1")));
            }
        }
        if config.keepalive_interval.is_zero() {
            return Err(SmuxError::Config("keepalive_interval must be > 0".into()));
        }
        let (accept_tx, accept_rx) = mpsc::channel(config.accept_backlog);
        let shared = Arc::new(Shared {
            conn,
            config,
            state: Mutex::new(State {
                streams: HashMap::new(),
                next_id: first_id,
                end: None,
            }),
            frames_received: AtomicU64::new(0),
            nops_received: AtomicU64::new(0),
            frames_unknown_stream: AtomicU64::new(0),
            streams_refused: AtomicU64::new(0),
        });
        // The tasks hold the shared state, not the guard, so dropping every
        // handle stops them.
        let (reader_shared, keepalive_shared) = (shared.clone(), shared.clone());
        let reader = tokio::spawn(async move {
            let err = read_frames(&reader_shared, accept_tx).await;
            reader_shared.end(err);
        });
        let keepalive = tokio::spawn(async move {
            let mut tick = tokio::time::interval(keepalive_shared.config.keepalive_interval);
            tick.tick().await;
            loop {
                tick.tick().await;
                if keepalive_shared.send_frame(CMD_NOP, 0, &[]).await.is_err() {
                    return;
                }
            }
        });
        Ok(Self {
            guard: Arc::new(Guard {
                shared,
                tasks: [reader, keepalive],
            }),
            accept_rx: tokio::sync::Mutex::new(accept_rx),
        })
    }

    /// The connection the session runs on.
    pub fn connection(&self) -> &Connection {
        &self.guard.shared.conn
    }

    /// Opens a stream (sends SYN).
    ///
    /// # Errors
    /// [`SmuxError::TooManyStreams`], why the session ended, or the connection's error.
    pub async fn open(&self) -> Result<SmuxStream, SmuxError> {
        let shared = &self.guard.shared;
        let (sid, rx) = {
            let mut st = shared.lock();
            if let Some(err) = &st.end {
                return Err(err.clone());
            }
            st.next_id = st.next_id.wrapping_add(2);
            let sid = st.next_id;
            drop(st);
            let rx = shared
                .register(sid)
                .ok_or(SmuxError::TooManyStreams(shared.config.max_streams))?;
            (sid, rx)
        };
        shared.send_frame(CMD_SYN, sid, &[]).await?;
        Ok(SmuxStream::new(sid, rx, self.guard.clone()))
    }

    /// The next stream the peer opened; `None` once the session ended.
    pub async fn accept(&self) -> Option<SmuxStream> {
        let stream = self.accept_rx.lock().await.recv().await?;
        Some(self.adopt(stream))
    }

    /// Why the session ended, if it has.
    pub fn error(&self) -> Option<SmuxError> {
        self.guard.shared.lock().end.clone()
    }

    /// Counters so far.
    pub fn stats(&self) -> SmuxStats {
        let s = &self.guard.shared;
        SmuxStats {
            frames_received: s.frames_received.load(Ordering::Relaxed),
            nops_received: s.nops_received.load(Ordering::Relaxed),
            frames_unknown_stream: s.frames_unknown_stream.load(Ordering::Relaxed),
            streams_refused: s.streams_refused.load(Ordering::Relaxed),
        }
    }
}

/// The reader task: turns the connection's messages into frames and delivers
/// them, until the connection or the protocol fails.
async fn read_frames(shared: &Arc<Shared>, accept_tx: mpsc::Sender<SmuxStream>) -> SmuxError {
    // Holds at most one incomplete frame plus one message.
    let mut buf = BytesMut::new();
    loop {
        let msg = match shared.conn.recv().await {
            Ok(Some(msg)) => msg,
            Ok(None) => return SmuxError::Closed,
            Err(e) => return SmuxError::Connection(e),
        };
        buf.extend_from_slice(&msg);
        loop {
            let frame = match next_frame(&mut buf) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => return e,
            };
            shared.frames_received.fetch_add(1, Ordering::Relaxed);
            match frame {
                Frame::Nop => {
                    shared.nops_received.fetch_add(1, Ordering::Relaxed);
                }
                Frame::Syn(sid) => {
                    let known = shared.lock().streams.contains_key(&sid);
                    if known {
                        shared.frames_unknown_stream.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    match shared.register(sid) {
                        Some(rx) => {
                            let stream = SmuxStream::pending(sid, rx, shared.clone());
                            if accept_tx.send(stream).await.is_err() {
                                return SmuxError::Closed;
                            }
                        }
                        None => {
                            shared.streams_refused.fetch_add(1, Ordering::Relaxed);
                            if let Err(e) = shared.send_frame(CMD_FIN, sid, &[]).await {
                                return e;
                            }
                        }
                    }
                }
                Frame::Fin(sid) => {
                    if shared.lock().streams.remove(&sid).is_none() {
                        shared.frames_unknown_stream.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Frame::Psh(sid, payload) => {
                    let tx = shared.lock().streams.get(&sid).cloned();
                    match tx {
                        // A stream whose reader is gone drops what it is sent.
                        Some(tx) => {
                            let _ = tx.send(payload).await;
                        }
                        None => {
                            shared.frames_unknown_stream.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
        }
    }
}

/// How a stream keeps its session alive.
#[derive(Debug, Clone)]
enum Owner {
    /// Opened or accepted through a session handle.
    Guard(Arc<Guard>),
    /// Queued by the reader task for `accept` (holds no guard, or the reader
    /// would keep itself alive); `accept` upgrades it.
    Pending(Arc<Shared>),
}

/// One smux stream: an ordered byte stream, read in the chunks the peer sent.
#[derive(Debug)]
pub struct SmuxStream {
    id: u32,
    rx: mpsc::Receiver<Bytes>,
    owner: Owner,
    closed: bool,
}

impl SmuxStream {
    fn new(id: u32, rx: mpsc::Receiver<Bytes>, guard: Arc<Guard>) -> Self {
        Self {
            id,
            rx,
            owner: Owner::Guard(guard),
            closed: false,
        }
    }

    fn pending(id: u32, rx: mpsc::Receiver<Bytes>, shared: Arc<Shared>) -> Self {
        Self {
            id,
            rx,
            owner: Owner::Pending(shared),
            closed: false,
        }
    }

    fn shared(&self) -> &Arc<Shared> {
        match &self.owner {
            Owner::Guard(g) => &g.shared,
            Owner::Pending(s) => s,
        }
    }

    /// The stream id (odd: opened by the client, even: by the server).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Sends all of `data` in PSH frames of at most `max_frame_size` bytes.
    ///
    /// # Errors
    /// [`SmuxError::Closed`] after [`close`](Self::close) or the peer's FIN, or
    /// the connection's error.
    pub async fn write(&self, data: &[u8]) -> Result<(), SmuxError> {
        write_stream(self.shared(), self.id, data).await
    }

    /// A handle that writes to this stream, so one task can write while another
    /// reads. It does not keep the stream open: once the stream is closed or
    /// dropped, its writes fail with [`SmuxError::Closed`].
    pub fn writer(&self) -> SmuxWriter {
        SmuxWriter {
            id: self.id,
            owner: self.owner.clone(),
        }
    }

    /// The next chunk of data; `Ok(None)` after the peer's FIN (everything it
    /// sent before has been read).
    ///
    /// # Errors
    /// Why the session ended, if it ended other than by the peer's FIN.
    pub async fn read(&mut self) -> Result<Option<Bytes>, SmuxError> {
        if let Some(chunk) = self.rx.recv().await {
            return Ok(Some(chunk));
        }
        match self.shared().lock().end.clone() {
            None | Some(SmuxError::Closed) => Ok(None),
            Some(err) => Err(err),
        }
    }

    /// Closes the stream: sends FIN; the peer then neither reads nor writes it.
    ///
    /// # Errors
    /// The connection's error.
    pub async fn close(&mut self) -> Result<(), SmuxError> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        let shared = self.shared().clone();
        shared.lock().streams.remove(&self.id);
        shared.send_frame(CMD_FIN, self.id, &[]).await
    }
}

/// Writes to one [`SmuxStream`] (see [`SmuxStream::writer`]).
#[derive(Debug, Clone)]
pub struct SmuxWriter {
    id: u32,
    owner: Owner,
}

impl SmuxWriter {
    /// As [`SmuxStream::write`].
    ///
    /// # Errors
    /// As [`SmuxStream::write`].
    pub async fn write(&self, data: &[u8]) -> Result<(), SmuxError> {
        let shared = match &self.owner {
            Owner::Guard(g) => &g.shared,
            Owner::Pending(s) => s,
        };
        write_stream(shared, self.id, data).await
    }
}

/// Sends `data` on stream `id` in PSH frames while the stream is open.
async fn write_stream(shared: &Shared, id: u32, data: &[u8]) -> Result<(), SmuxError> {
    for chunk in data.chunks(shared.config.max_frame_size) {
        {
            let st = shared.lock();
            if let Some(err) = &st.end {
                return Err(err.clone());
            }
            if !st.streams.contains_key(&id) {
                return Err(SmuxError::Closed);
            }
        }
        shared.send_frame(CMD_PSH, id, chunk).await?;
    }
    Ok(())
}

impl SmuxSession {
    /// Gives an accepted stream a handle on the session's guard.
    fn adopt(&self, mut stream: SmuxStream) -> SmuxStream {
        stream.owner = Owner::Guard(self.guard.clone());
        stream
    }
}

impl Drop for SmuxStream {
    /// A stream dropped without [`close`](Self::close) is closed in the background.
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        let shared = self.shared().clone();
        let id = self.id;
        let was_open = shared.lock().streams.remove(&id).is_some();
        if let (true, Ok(rt)) = (was_open, tokio::runtime::Handle::try_current()) {
            rt.spawn(async move {
                let _ = shared.send_frame(CMD_FIN, id, &[]).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_across_and_within_messages() {
        let mut wire = Vec::new();
        encode_frame(CMD_SYN, 3, &[], &mut wire);
        encode_frame(CMD_PSH, 3, b"hello", &mut wire);
        encode_frame(CMD_NOP, 0, &[], &mut wire);
        encode_frame(CMD_FIN, 3, &[], &mut wire);
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        // One byte at a time: frames complete only when all their bytes are in.
        for b in wire {
            buf.extend_from_slice(&[b]);
            while let Some(f) = next_frame(&mut buf).expect("well-formed frames") {
                frames.push(f);
            }
        }
        assert_eq!(
            frames,
            [
                Frame::Syn(3),
                Frame::Psh(3, Bytes::from_static(b"hello")),
                Frame::Nop,
                Frame::Fin(3)
            ]
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn other_versions_and_commands_are_protocol_errors() {
        let mut buf = BytesMut::from(&[2u8, CMD_PSH, 0, 0, 3, 0, 0, 0][..]);
        assert!(
            matches!(next_frame(&mut buf), Err(SmuxError::Protocol(m)) if m.contains("version 2"))
        );
        let mut buf = BytesMut::from(&[1u8, 9, 0, 0, 3, 0, 0, 0][..]);
        assert!(
            matches!(next_frame(&mut buf), Err(SmuxError::Protocol(m)) if m.contains("command 9"))
        );
    }
}
