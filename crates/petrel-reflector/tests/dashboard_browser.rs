//! The operator dashboard in a real browser: a reflector on loopback with
//! its HTTP endpoint, two devices that log in and talk (one with the
//! callsign `<img src=x onerror=alert(1)>`), then headless Chromium,
//! driven over the Chrome DevTools Protocol, loads `/dashboard`, is
//! refused with a wrong admin token and with an account that is not an
//! administrator (403 shown on the form), signs in with an admin account's
//! username and password (the real `POST /api/auth/login`), and must show
//! both devices in "last heard", the hostile callsign as text; the
//! page must raise no script error and break no Content-Security-Policy
//! rule; signed out, the admin token signs in as well. A screenshot of the signed-in page is saved to
//! `target/tmp/dashboard-browser-<backend>/dashboard.png` (or to the path in
//! `PETREL_DASHBOARD_SCREENSHOT`); `tests/dashboard_screenshot.sh` runs
//! this test and prints where the picture is.
//!
//! Skipped with a message when Chromium is not installed;
//! `PETREL_REQUIRE_CHROMIUM=1` (set by `.ci/run`) makes that a failure.
//! Chromium runs with `--no-sandbox` (its sandbox refuses to start as
//! root) on a fresh profile directory, talks to loopback only, and is
//! killed by its PID when the test ends, pass or fail.

#![allow(clippy::unwrap_used)]

#[macro_use]
mod support;

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use futures_util::{SinkExt, StreamExt};
use petrel_reflector::codec::{decode, encode, merge_frames, Header, PacketType};
use petrel_reflector::model::ServerConfig;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use support::app_server::{open_app_store, serve_app, PASSWORD};
use support::Env;

on_every_backend!(signed_in_operator_sees_who_just_talked,);

const TOKEN: &str = "0123456789abcdef";
const PW: &str = "Bench123";
const HOSTILE: &str = "<img src=x onerror=alert(1)>";
/// Longest any one wait on Chromium may take.
const WAIT: Duration = Duration::from_secs(30);

/// The first Chromium on `PATH`.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|p| p.is_file())
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A headless Chromium, killed by its PID when dropped.
struct Chromium {
    child: Child,
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts Chromium on a fresh profile in `work`; returns it and the
/// browser's DevTools websocket URL.
fn launch(bin: &Path, work: &Path) -> (Chromium, String) {
    let profile = work.join("profile");
    let child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "--window-size=1280,900",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(work.join("chromium.err")).unwrap())
        .spawn()
        .unwrap();
    let chromium = Chromium { child };
    // Chromium writes the port it chose and the browser's path here.
    let port_file = profile.join("DevToolsActivePort");
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(s) = std::fs::read_to_string(&port_file) {
            let mut lines = s.lines();
            if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                return (chromium, format!("ws://127.0.0.1:{port}{path}"));
            }
        }
        assert!(
            Instant::now() < deadline,
            "Chromium wrote no DevToolsActivePort in {WAIT:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A DevTools Protocol connection with one page session; keeps the
/// page's script errors, console and CSP errors, and failed requests it
/// was told about.
struct Cdp {
    ws: Socket,
    next_id: u64,
    session: Option<String>,
    problems: Vec<String>,
    /// Failed requests the console reported (other than `/favicon.ico`).
    network_errors: Vec<String>,
}

impl Cdp {
    async fn connect(url: &str) -> Self {
        let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        Self {
            ws,
            next_id: 0,
            session: None,
            problems: Vec::new(),
            network_errors: Vec::new(),
        }
    }

    /// Sends `method` and waits for its answer (at most [`WAIT`]).
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        self.ws.send(Message::text(msg.to_string())).await.unwrap();
        let answer = tokio::time::timeout(WAIT, async {
            loop {
                let m = self.ws.next().await.expect("DevTools closed").unwrap();
                let Ok(text) = m.to_text() else { continue };
                let v: Value = serde_json::from_str(text).unwrap();
                if v["id"] == json!(id) {
                    return v;
                }
                self.note_event(&v);
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{method}: no answer in {WAIT:?}"));
        assert!(answer.get("error").is_none(), "{method}: {answer}");
        answer["result"].clone()
    }

    fn note_event(&mut self, v: &Value) {
        match v["method"].as_str() {
            Some("Runtime.exceptionThrown") => self
                .problems
                .push(format!("exception: {}", v["params"]["exceptionDetails"])),
            Some("Log.entryAdded") => {
                let e = &v["params"]["entry"];
                let url = e["url"].as_str().unwrap_or_default();
                if e["level"] != "error" || url.ends_with("/favicon.ico") {
                    return;
                }
                if e["source"] == "network" {
                    self.network_errors
                        .push(e["text"].as_str().unwrap_or_default().to_owned());
                } else {
                    self.problems.push(format!("console: {e}"));
                }
            }
            _ => {}
        }
    }

    /// The value of `expr` in the page (promises awaited).
    async fn eval(&mut self, expr: &str) -> Value {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({ "expression": expr, "returnByValue": true, "awaitPromise": true }),
            )
            .await;
        assert!(r.get("exceptionDetails").is_none(), "{expr}: {r}");
        r["result"]["value"].clone()
    }

    /// Polls `expr` until it is `true`; panics after [`WAIT`] with `what`
    /// and the value of `show`.
    async fn wait_for(&mut self, expr: &str, what: &str, show: &str) {
        let deadline = Instant::now() + WAIT;
        while self.eval(expr).await != json!(true) {
            if Instant::now() > deadline {
                let shown = self.eval(show).await;
                panic!("{what} not within {WAIT:?}; the page shows: {shown}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A device on its own loopback address.
struct Device {
    sock: UdpSocket,
    server: SocketAddr,
    name: &'static str,
}

impl Device {
    fn new(ip: [u8; 4], server: SocketAddr, name: &'static str) -> Self {
        let sock = UdpSocket::bind(SocketAddr::from((ip, 0))).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        Self { sock, server, name }
    }

    fn login(&self) {
        let mut data = vec![0u8; 24];
        data.extend_from_slice(b"02:42:7F:00:05:07");
        let hb = support::heartbeat(self.name, 7, PW, &data);
        self.sock.send_to(&hb, self.server).unwrap();
        let reply = support::recv_type(&self.sock, PacketType::Heartbeat).expect("login reply");
        let callsign = decode(&reply)
            .unwrap()
            .header
            .callsign_str()
            .unwrap()
            .to_owned();
        assert!(!callsign.is_empty(), "{} rejected", self.name);
    }

    /// Five voice packets, 60 ms apart.
    fn talk(&self) {
        let mut h = Header::new(PacketType::Voice);
        h.set_username(self.name);
        h.set_password(PW);
        h.ssid = 7;
        let voice = merge_frames([&[1u8; 40][..], &[2u8; 38][..]]).unwrap();
        for _ in 0..5 {
            self.sock
                .send_to(&encode(&h, &voice).unwrap(), self.server)
                .unwrap();
            std::thread::sleep(Duration::from_millis(60));
        }
    }
}

/// A loopback port that was free a moment ago: the page's origin must be
/// in `[apps] allowed_origins` before the server starts (the account
/// sign-in posts to `/api/auth/login`, §1.1 origin guard).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

const LAST_HEARD: &str = "document.querySelector('#last-heard tbody')";

fn signed_in_operator_sees_who_just_talked(env: &Env) {
    let Some(bin) = chromium() else {
        let msg = "chromium not found; install it (apt install chromium) to check the dashboard in a browser";
        assert!(
            std::env::var("PETREL_REQUIRE_CHROMIUM").as_deref() != Ok("1"),
            "PETREL_REQUIRE_CHROMIUM=1: {msg}"
        );
        eprintln!("skipping: {msg}");
        return;
    };
    let work = scratch(&format!("dashboard-browser-{:?}", env.backend).to_ascii_lowercase());
    let users = [
        support::account("alice", "BT00000".into(), 9_000_000, PW),
        support::account("mallory", HOSTILE.into(), 9_000_001, PW),
    ];
    // Web accounts: root (admin) and carol (not).
    let store = open_app_store(env, &["root", "carol"]);
    env.rt.block_on(async {
        support::add_users(&store, users).await;
        store.set_user_roles("root", "admin").await.unwrap();
    });
    let http: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let tune = |c: &mut ServerConfig| {
        c.http_listen = Some(http);
        c.admin_token = Some(TOKEN.into());
        if let Some(apps) = c.apps.as_mut() {
            apps.allowed_origins = vec![format!("http://{http}")];
        }
    };
    serve_app(env, store, tune, |srv, http, _| {
        let alice = Device::new([127, 0, 5, 1], srv.local_addr(), "alice");
        let mallory = Device::new([127, 0, 5, 2], srv.local_addr(), "mallory");
        alice.login();
        mallory.login();
        alice.talk();
        // The floor frees 900 ms (`floor_hold_ms`) after alice's last packet.
        std::thread::sleep(Duration::from_millis(1_100));
        mallory.talk();
        let page = format!("http://{http}/dashboard");

        let (_chromium, ws_url) = launch(&bin, &work);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(drive(&ws_url, &page, &work));
    });
}

/// Fills the sign-in form with `token`, or `username` and [`PASSWORD`],
/// and submits it.
fn submit(token: &str, username: &str) -> String {
    format!(
        "(() => {{ const f = document.getElementById('signin'); \
         f.elements.token.value = {}; f.elements.username.value = {}; \
         f.elements.password.value = {}; f.requestSubmit(); return true; }})()",
        json!(token),
        json!(username),
        json!(PASSWORD)
    )
}

const SIGNIN_ERROR: &str = "document.getElementById('signin-error').textContent";

async fn drive(ws_url: &str, page: &str, work: &Path) {
    let mut cdp = Cdp::connect(ws_url).await;
    let target = cdp
        .call("Target.createTarget", json!({ "url": "about:blank" }))
        .await;
    let attached = cdp
        .call(
            "Target.attachToTarget",
            json!({ "targetId": target["targetId"], "flatten": true }),
        )
        .await;
    cdp.session = Some(attached["sessionId"].as_str().unwrap().to_owned());
    for domain in ["Page.enable", "Runtime.enable", "Log.enable"] {
        cdp.call(domain, json!({})).await;
    }
    cdp.call(
        "Emulation.setDeviceMetricsOverride",
        json!({ "width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false }),
    )
    .await;
    cdp.call("Page.navigate", json!({ "url": page })).await;
    cdp.wait_for(
        "document.readyState === 'complete' && !document.getElementById('signin').classList.contains('hidden')",
        "the sign-in form",
        "document.body.innerText",
    )
    .await;

    // The server offers account sign-in, without a captcha here.
    assert_eq!(
        cdp.eval(
            "[!document.getElementById('account-fields').classList.contains('hidden'), \
                  document.getElementById('captcha-fields').classList.contains('hidden')]"
        )
        .await,
        json!([true, true])
    );

    // A wrong token is refused on the form.
    cdp.eval(&submit("not-the-token-at-all", "")).await;
    cdp.wait_for(
        &format!("{SIGNIN_ERROR} === 'Sign-in refused.'"),
        "the refusal",
        SIGNIN_ERROR,
    )
    .await;
    assert_eq!(cdp.eval("sessionStorage.length").await, json!(0));

    // An account without the admin role logs in but is refused the data.
    cdp.eval(&submit("", "carol")).await;
    cdp.wait_for(
        &format!("{SIGNIN_ERROR}.startsWith('This account is not an administrator')"),
        "the non-admin refusal",
        SIGNIN_ERROR,
    )
    .await;
    assert_eq!(cdp.eval("sessionStorage.length").await, json!(0));

    // The admin account signs in.
    cdp.eval(&submit("", "root")).await;
    cdp.wait_for(
        &format!("{LAST_HEARD}.textContent.includes('BT00000')"),
        "alice in last heard",
        &format!("{LAST_HEARD}.innerText"),
    )
    .await;
    cdp.wait_for(
        &format!("{LAST_HEARD}.textContent.includes({})", json!(HOSTILE)),
        "mallory in last heard",
        &format!("{LAST_HEARD}.innerText"),
    )
    .await;

    let rows = cdp
        .eval(&format!(
            "[...{LAST_HEARD}.rows].map(r => [...r.cells].map(c => c.textContent))"
        ))
        .await;
    let rows = rows.as_array().unwrap();
    let row_of = |callsign: &str| {
        rows.iter()
            .find(|r| r[0] == json!(callsign))
            .unwrap_or_else(|| panic!("no row for {callsign}: {rows:?}"))
            .clone()
    };
    let alice = row_of("BT00000");
    assert_eq!(alice[1], json!("alice-7"), "{alice}");
    assert_eq!(alice[2], json!("UDP"), "{alice}");
    let mallory = row_of(HOSTILE);
    assert_eq!(mallory[1], json!("mallory-7"), "{mallory}");
    // Newest first.
    assert_eq!(rows[0][0], json!(HOSTILE), "{rows:?}");
    // The hostile callsign is text: no element was made of it.
    assert_eq!(
        cdp.eval("document.querySelectorAll('#main img').length")
            .await,
        json!(0)
    );

    // Signed in: the credential is in this tab's sessionStorage, not in
    // the URL, and the group table counts both devices.
    let credential = cdp
        .eval("sessionStorage.getItem('petrel.dashboard.credential')")
        .await;
    assert!(
        credential.as_str().is_some_and(|c| c.starts_with("eyJ")),
        "not an access token: {credential}"
    );
    assert_eq!(cdp.eval("location.href").await, json!(page));
    cdp.wait_for(
        "[...document.querySelector('#groups tbody').rows].some(r => r.cells[4] && r.cells[4].textContent === '2')",
        "two sessions in a group",
        "document.querySelector('#groups tbody').innerText",
    )
    .await;
    assert_eq!(
        cdp.eval("document.getElementById('t-online').textContent")
            .await,
        json!("2")
    );

    let shot = cdp
        .call(
            "Page.captureScreenshot",
            json!({ "format": "png", "captureBeyondViewport": true }),
        )
        .await;
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot["data"].as_str().unwrap())
        .unwrap();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    let path = std::env::var_os("PETREL_DASHBOARD_SCREENSHOT")
        .map_or_else(|| work.join("dashboard.png"), PathBuf::from);
    std::fs::write(&path, &png).unwrap();
    eprintln!("dashboard screenshot: {}", path.display());

    // Signed out, the admin token signs in too.
    cdp.eval("document.getElementById('signout').click() || true")
        .await;
    cdp.eval(&submit(TOKEN, "")).await;
    cdp.wait_for(
        "!document.getElementById('main').classList.contains('hidden') && \
         sessionStorage.getItem('petrel.dashboard.credential') !== null",
        "the token sign-in",
        SIGNIN_ERROR,
    )
    .await;
    assert_eq!(
        cdp.eval("sessionStorage.getItem('petrel.dashboard.credential')")
            .await,
        json!(TOKEN)
    );

    // Let pending events arrive, then check the page raised nothing.
    cdp.eval("new Promise(r => setTimeout(() => r(true), 300))")
        .await;
    assert!(cdp.problems.is_empty(), "{:#?}", cdp.problems);
    // The failed requests are the refused token (401) and carol's (403).
    let errors = &cdp.network_errors;
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(
        errors[0].contains("401") && errors[1].contains("403"),
        "{errors:#?}"
    );
}
