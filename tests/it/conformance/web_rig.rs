//! The web chat's conformance rig: the core's own HTTP API, no fake needed. The chat needs a
//! bearer token (`web.token`), which is the web's allowlist: the owner and the second person
//! carry it, the stranger does not. A person sees what the chat page shows: the answer to each
//! message they posted (or its refusal), in the order they posted them, and after an answer the
//! files its row carries (listed by `/api/v1/lanes/{lane}/sessions/{id}/messages`), fetched
//! from their URLs. The web chat has no per-person identity past that guard: whoever holds the
//! token is the conversation's person (`people: false`).
//!
//! What the web does not have, declared in [`Caps`]: no length limit (a reply is one message),
//! no edits (a streamed reply reaches the page as deltas and then the committed text), no
//! platform between the core and the page that could answer 429, and no file input.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use herald::adapters::split::Measure;
use herald::app::App;
use herald::config::{Config, Secret};
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::harness::{init, test_config, wait_for};
use herald_test_support::promise::load::WebChannel;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use super::{Caps, Rig, Seen, Who};

const TOKEN: &str = "conformance-web-token";
const LANE: &str = "web:conf";
const STRANGER_LANE: &str = "web:stranger";
const WAIT: Duration = Duration::from_secs(20);

/// A posted message's conversation and what it was answered (or refused with); `None` while
/// waiting.
type Answer = (Who, Option<String>);

pub struct WebRig {
    llm: FakeLlm,
    app: App,
    base: String,
    http: reqwest::Client,
    /// The chat requests still waiting for their answers.
    pending: Mutex<Vec<JoinHandle<()>>>,
    /// When each answer came back to its request.
    answered_at: Arc<Mutex<Vec<Instant>>>,
    /// What each posted message was answered (or refused with), by conversation, in the
    /// order they were posted; `None` while waiting.
    answers: Arc<Mutex<Vec<Answer>>>,
    _data: tempfile::TempDir,
}

fn sender(who: Who) -> &'static str {
    match who {
        Who::Owner => "ana",
        Who::Other => "bob",
        Who::Stranger => "eve",
    }
}

impl WebRig {
    fn request(&self, who: Who, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        if who == Who::Stranger {
            r
        } else {
            r.bearer_auth(TOKEN)
        }
    }

    async fn get(&self, path: &str) -> Value {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(TOKEN);
        let r = r.send().await.expect("GET");
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.json().await.expect("JSON")
    }

    /// The files of the conversation's answers, with the text of the answer each came with.
    async fn files(&self) -> Vec<(String, Seen)> {
        let sessions = self.get(&format!("/api/v1/lanes/{LANE}/sessions")).await;
        let ids = sessions["sessions"].as_array().cloned().unwrap_or_default();
        let mut files = Vec::new();
        for s in ids.iter().rev() {
            let id = s["id"].as_str().unwrap_or_default();
            let page = self
                .get(&format!("/api/v1/lanes/{LANE}/sessions/{id}/messages"))
                .await;
            for m in page["messages"].as_array().into_iter().flatten() {
                for f in m["files"].as_array().into_iter().flatten() {
                    let url = format!("{}{}", self.base, f["url"].as_str().unwrap_or_default());
                    let r = self.http.get(url).bearer_auth(TOKEN).send().await;
                    let bytes = r.expect("file").bytes().await.expect("bytes").to_vec();
                    let name = f["name"].as_str().or(f["id"].as_str()).unwrap_or_default();
                    let file = Seen::File {
                        name: name.to_string(),
                        bytes,
                    };
                    files.push((m["content"].as_str().unwrap_or_default().to_string(), file));
                }
            }
        }
        files
    }

    async fn pending_approval(&self) -> Option<Value> {
        let v = self.get(&format!("/api/v1/lanes/{LANE}/approvals")).await;
        v["approvals"].as_array()?.first().cloned()
    }
}

impl Rig for WebRig {
    type Crash = WebChannel;
    const LANE: &'static str = LANE;

    fn caps() -> Caps {
        Caps {
            declared: herald::adapters::web::SPEC.caps,
            measure: Measure::Chars,
            rate_limits: false,
            people: false,
        }
    }

    async fn crash_side() -> WebChannel {
        WebChannel::new(Vec::new())
    }

    async fn start(tune: impl FnOnce(&mut Config)) -> WebRig {
        init();
        let llm = FakeLlm::start().await;
        let data = tempfile::tempdir().expect("temp dir");
        let mut c = test_config(&llm, &data);
        c.web.token = Some(Secret::new(TOKEN));
        tune(&mut c);
        let app = App::start(c).await.expect("app starts");
        WebRig {
            llm,
            base: format!("http://{}", app.addr),
            app,
            http: reqwest::Client::new(),
            pending: Mutex::new(Vec::new()),
            answered_at: Arc::default(),
            answers: Arc::default(),
            _data: data,
        }
    }

    fn llm(&self) -> &FakeLlm {
        &self.llm
    }

    fn app(&self) -> &App {
        &self.app
    }

    /// Posts without waiting: the answer is recorded when the request returns.
    async fn say(&self, who: Who, text: &str) {
        let lane = if who == Who::Stranger {
            STRANGER_LANE
        } else {
            LANE
        };
        let body = json!({"lane": lane, "text": text, "sender": sender(who)});
        let post = self.http.post(format!("{}/api/v1/chat", self.base));
        let post = self.request(who, post).json(&body);
        let (answered_at, answers) = (self.answered_at.clone(), self.answers.clone());
        let conversation = if who == Who::Stranger {
            who
        } else {
            Who::Owner
        };
        let slot = {
            let mut answers = answers.lock().unwrap();
            answers.push((conversation, None));
            answers.len() - 1
        };
        let task = tokio::spawn(async move {
            let r = post.send().await.expect("chat request");
            let status = r.status();
            let v: Value = r.json().await.unwrap_or(Value::Null);
            let said = if status.is_success() {
                answered_at.lock().unwrap().push(Instant::now());
                v["reply"].as_str().map(str::to_string)
            } else {
                v["error"].as_str().map(str::to_string)
            };
            answers.lock().unwrap()[slot].1 = Some(said.unwrap_or_else(|| format!("{status} {v}")));
        });
        self.pending.lock().unwrap().push(task);
    }

    /// The web chat takes no file: the person can only type the caption.
    async fn photo(&self, _bytes: &[u8], caption: &str) {
        self.say(Who::Owner, caption).await;
    }

    async fn document(&self, _name: &str, _mime: &str, _bytes: &[u8]) {
        panic!("the web chat has no file input: its SPEC must declare files_in: false")
    }

    async fn question(&self) -> String {
        wait_for("an approval question", WAIT, async || {
            let a = self.pending_approval().await?;
            Some(format!("{} {}", a["tool"], a["arguments"]))
        })
        .await
    }

    async fn press(&self, who: Who, approve: bool) -> String {
        let a = self.pending_approval().await.expect("a question to press");
        let id = a["id"]
            .as_str()
            .map_or_else(|| a["id"].to_string(), str::to_string);
        let body = json!({"lane": LANE, "approve": approve, "sender": sender(who)});
        let post = self
            .http
            .post(format!("{}/api/v1/approvals/{id}", self.base));
        let r = self
            .request(who, post)
            .json(&body)
            .send()
            .await
            .expect("press");
        let v: Value = r.json().await.expect("JSON");
        let said = v["message"].as_str().or(v["error"].as_str());
        said.unwrap_or_default().to_string()
    }

    async fn seen(&self, who: Who) -> Vec<Seen> {
        let conversation = if who == Who::Stranger {
            who
        } else {
            Who::Owner
        };
        let answers: Vec<String> = self
            .answers
            .lock()
            .unwrap()
            .iter()
            .filter(|(c, _)| *c == conversation)
            .filter_map(|(_, a)| a.clone())
            .collect();
        let files = if who == Who::Stranger {
            Vec::new()
        } else {
            self.files().await
        };
        let mut seen = Vec::new();
        for a in answers {
            seen.push(Seen::Text(a.clone()));
            for (_, file) in files.iter().filter(|(text, _)| *text == a) {
                seen.push(file.clone());
            }
        }
        seen
    }

    /// The page is handed the committed text: nothing is ever edited.
    fn edits(&self) -> usize {
        0
    }

    /// Nothing between the core and the page answers 429.
    fn refuse_next_send(&self, _secs: u64) {}

    fn send_times(&self) -> Vec<Instant> {
        self.answered_at.lock().unwrap().clone()
    }

    async fn stop(self) {
        let pending = std::mem::take(&mut *self.pending.lock().unwrap());
        for task in pending {
            let _ = tokio::time::timeout(WAIT, task).await;
        }
        self.app.shutdown().await;
    }
}
