//! A minimal W3C WebDriver client for tests that drive a real headless Chromium (system
//! packages `chromium` + `chromium-driver`): the few JSON-over-HTTP calls the page tests need
//! (reqwest is already a dependency), not a client crate: the protocol is small and that keeps
//! the build lighter. Shared by the admin page test and the streaming web chat test.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A binary on PATH (or a known Debian location).
pub fn find(names: &[&str]) -> Option<String> {
    names.iter().find_map(|n| {
        let out = Command::new("which").arg(n).output().ok()?;
        let p = String::from_utf8(out.stdout).ok()?.trim().to_string();
        (!p.is_empty()).then_some(p)
    })
}

pub struct Driver {
    child: Child,
    url: String,
    session: String,
    http: reqwest::Client,
}

impl Driver {
    pub async fn start(chromedriver: &str, chromium: &str) -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let url = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while http.get(format!("{url}/status")).send().await.is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"
            ]}
        }}});
        let r: Value = http
            .post(format!("{url}/session"))
            .json(&caps)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let session = r["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {r}"))
            .to_string();
        Driver {
            child,
            url,
            session,
            http,
        }
    }

    pub async fn cmd(&self, path: &str, body: Value) -> Value {
        let r: Value = self
            .http
            .post(format!("{}/session/{}/{path}", self.url, self.session))
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        r["value"].clone()
    }

    pub async fn find(&self, css: &str) -> String {
        let v = self
            .cmd("element", json!({"using": "css selector", "value": css}))
            .await;
        v.as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_string()
    }

    pub async fn text_of(&self, css: &str) -> String {
        let v = self
            .cmd(
                "execute/sync",
                json!({"script": "const e = document.querySelector(arguments[0]); return e ? e.innerText : null;", "args": [css]}),
            )
            .await;
        v.as_str().unwrap_or_default().to_string()
    }

    /// Polls until the element's visible text satisfies `ok`.
    pub async fn wait_text(&self, css: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let t = self.text_of(css).await;
            if ok(&t) {
                return t;
            }
            assert!(
                Instant::now() < deadline,
                "{css} never showed the expected text; it shows: {t:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn click(&self, css: &str) {
        let el = self.find(css).await;
        self.cmd(&format!("element/{el}/click"), json!({})).await;
    }

    /// A PNG of the page as it is shown now.
    pub async fn screenshot(&self) -> Vec<u8> {
        let r: Value = self
            .http
            .get(format!("{}/session/{}/screenshot", self.url, self.session))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        decode_base64(r["value"].as_str().unwrap_or_default())
    }

    pub async fn stop(mut self) {
        let _ = self
            .http
            .delete(format!("{}/session/{}", self.url, self.session))
            .send()
            .await;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Standard base64 (the screenshot's encoding), without pulling a crate in for one call.
fn decode_base64(s: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for v in s.bytes().filter_map(value) {
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}
