//! The attacker's view, end to end: what one person's agent can read of another person's
//! conversation, who can call which HTTP route from where, and what a hostile client id or a
//! hostile provider body does. Every case here was an exploitable hole once.

use std::time::Duration;

use herald::app::App;
use herald::config::{Config, Secret};
use herald::domain::LaneKey;
use herald::domain::SessionId;
use herald::http::{table, Guard};
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::fake_telegram::FakeTelegram;
use herald_test_support::harness::{init, test_config, Client};
use herald_test_support::herald::Herald;
use herald_test_support::telegram::tg_config;
use reqwest::Method;
use serde_json::{json, Value};

/// The tool message the model received in request `n` (0-based), as text.
fn tool_result(llm: &FakeLlm, n: usize) -> String {
    llm.requests()[n].last_tool_result()
}

async fn session_of(app: &App, lane: &str) -> String {
    app.store
        .session_current(&LaneKey::new(lane))
        .await
        .unwrap()
        .expect("the lane has a session")
        .id
        .into_string()
}

/// The id of the first message of `lane`'s session that contains `needle`.
async fn message_with(app: &App, lane: &str, needle: &str) -> i64 {
    let sid = session_of(app, lane).await;
    app.store
        .messages(&SessionId::from(&sid), false)
        .await
        .unwrap()
        .into_iter()
        .find(|m| m.content.contains(needle))
        .expect("the message is stored")
        .id
}

/// Runs one turn in `lane` in which the model calls `session_search` with `args`, and returns
/// what the tool answered.
async fn search_from(app: &App, llm: &FakeLlm, lane: &str, args: Value) -> String {
    llm.push(Step::ToolCall("session_search".into(), args.to_string()));
    let before = llm.request_count();
    let (status, body) = Client::new(app).chat(lane, "look it up").await;
    assert_eq!(status, 200, "{body}");
    tool_result(llm, before + 1)
}

#[tokio::test]
async fn session_search_reads_only_the_asking_lanes_sessions() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    config.handoff.confidential_lanes = vec!["web:carol".into()];
    let app = App::start(config).await.unwrap();
    let client = Client::new(&app);

    for (lane, secret) in [
        ("web:alice", "my locker code is zanzibar4471"),
        ("web:carol", "the merger codename is quixotic9"),
    ] {
        let (status, _) = client.chat(lane, secret).await;
        assert_eq!(status, 200);
    }
    let alice_sid = session_of(&app, "web:alice").await;
    let alice_msg = message_with(&app, "web:alice", "zanzibar4471").await;

    // Discovery from another lane finds nothing, from the owner's lane it finds the message.
    for word in ["zanzibar4471", "quixotic9"] {
        let got = search_from(&app, &llm, "web:bob", json!({"query": word})).await;
        assert_eq!(got, r#"{"results":[]}"#, "bob searched {word}");
    }
    let own = search_from(&app, &llm, "web:alice", json!({"query": "zanzibar4471"})).await;
    assert!(
        own.contains(&alice_sid) && own.contains("[zanzibar4471]"),
        "{own}"
    );

    // Scroll and page with alice's ids from bob's lane answer exactly like ids that do not
    // exist: nothing tells bob the session is real.
    for extra in [json!({}), json!({"offset": 0})] {
        let ask = |sid: &str| {
            let mut a = json!({"session_id": sid, "around_message_id": alice_msg});
            a.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            a
        };
        let stolen = search_from(&app, &llm, "web:bob", ask(&alice_sid)).await;
        let missing = search_from(&app, &llm, "web:bob", ask("no-such-session")).await;
        assert!(!stolen.contains("zanzibar"), "{stolen}");
        assert_eq!(
            stolen.replace(&alice_sid, "SID"),
            missing.replace("no-such-session", "SID"),
            "another lane's session must look missing"
        );
        let owner = search_from(&app, &llm, "web:alice", ask(&alice_sid)).await;
        assert!(owner.contains("zanzibar4471"), "{owner}");
    }
    // Whatever bob's model was told, no reply to bob quotes another lane.
    for (role, content) in client.transcript("web:bob").await {
        assert!(
            !content.contains("zanzibar") && !content.contains("quixotic"),
            "{role}: {content}"
        );
    }
    app.shutdown().await;
}

#[tokio::test]
async fn session_search_across_telegram_chats_stays_in_the_chat() {
    init();
    let tg = FakeTelegram::start(herald_test_support::telegram::TOKEN).await;
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = tg_config(&tg, &llm, &data);
    config.telegram.allowed_users = vec!["111".into(), "999".into()];
    let app = App::start(config).await.unwrap();

    tg.push_private_text(111, 111, "my pin is 8675309 keep it safe");
    tg.wait_for_sent(1, Duration::from_secs(15)).await;
    llm.push(Step::ToolCall(
        "session_search".into(),
        json!({"query": "8675309"}).to_string(),
    ));
    tg.push_private_text(999, 999, "what pins do you know?");
    let sent = tg.wait_for_sent(2, Duration::from_secs(15)).await;
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 3, "one turn in 111, a tool round trip in 999");
    assert_eq!(tool_result(&llm, 2), r#"{"results":[]}"#);
    for m in sent.iter().filter(|m| m.chat_id == 999) {
        assert!(!m.text.contains("8675309"), "chat 999 got {:?}", m.text);
    }
    app.shutdown().await;
    tg.shutdown().await;
}

#[tokio::test]
async fn a_client_id_reused_in_another_lane_is_a_new_message() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let client = Client::new(&app);

    let post = |lane: &str, text: &str| json!({"lane": lane, "text": text, "client_id": "1"});
    let (_, a) = client.chat_body(post("web:a", "alpha")).await;
    let (_, b) = client.chat_body(post("web:b", "beta")).await;
    assert_eq!(a["reply"], "reply to: alpha");
    assert_eq!(b["reply"], "reply to: beta", "lane b got {b}");
    assert_ne!(a["session_id"], b["session_id"]);
    assert_ne!(a["inbox_id"], b["inbox_id"]);
    // Within a lane the id still deduplicates.
    let (_, again) = client.chat_body(post("web:a", "alpha")).await;
    assert_eq!(again["inbox_id"], a["inbox_id"]);
    assert_eq!(llm.request_count(), 2);

    // Ids and names are bounded; a huge one is refused before anything is stored.
    let huge = "x".repeat(900_000);
    for body in [
        json!({"lane": "web:a", "text": "hi", "client_id": huge}),
        json!({"lane": "web:a", "text": "hi", "sender": huge}),
        json!({"lane": format!("web:{huge}"), "text": "hi"}),
    ] {
        let (s, e) = client.chat_body(body).await;
        assert_eq!(s, 400, "{e}");
        assert!(e["error"].as_str().unwrap().contains("longer than"), "{e}");
    }
    // A body over the 1 MB limit is "too large", not "bad request".
    let (s, _) = client
        .chat_body(json!({"lane": "web:a", "text": "y".repeat(1_100_000)}))
        .await;
    assert_eq!(s, 413);
    assert_eq!(llm.request_count(), 2);
    let lanes = app.store.lanes_overview(100).await.unwrap();
    assert_eq!(lanes.len(), 2, "only web:a and web:b exist: {lanes:?}");
    app.shutdown().await;
}

/// How a request presents itself.
#[derive(Debug, Clone, Copy)]
enum Cred {
    None,
    Wrong,
    Right,
    /// An `[[api.keys]]` key: it opens the OpenAI-compatible routes and nothing else.
    ApiKey,
}

const TOKEN: &str = "a-long-random-operator-token";
const API_KEY: &str = "sk-herald-probe-0123456789";

/// One deployment shape of the table: where it listens, its token, whether loopback is trusted
/// and whether the web chat is on.
struct Shape {
    listen: &'static str,
    token: bool,
    trust_loopback: Option<bool>,
    web: bool,
}

fn config_for(shape: &Shape, llm: &FakeLlm, data: &tempfile::TempDir) -> Config {
    let mut c = test_config(llm, data);
    c.server.listen = shape.listen.parse().unwrap();
    c.web.token = shape.token.then(|| Secret::new(TOKEN));
    c.web.trust_loopback = shape.trust_loopback;
    c.web.enabled = shape.web;
    c.people = vec![herald::config::Person {
        name: "probe".into(),
        ids: vec![],
    }];
    // A hook delivers to the web chat, so only the shapes with it on have one (the route is
    // always mounted: an unknown name is 404).
    c.hooks = shape
        .web
        .then(|| herald::config::HookSpec {
            name: "probe-hook".into(),
            secret: Some(Secret::new("a-hook-secret-0123456789")),
            secret_env: None,
            signature: herald::config::SignatureKind::Github,
            mode: herald::config::HookMode::Notify,
            prompt: "x".into(),
            deliver: vec!["web:probe".into()],
            budget: None,
            filter: Vec::new(),
            max_body_bytes: 1024,
            rate_per_min: 1000,
        })
        .into_iter()
        .collect();
    c.api.enabled = true;
    c.api.keys = vec![herald::config::ApiKeyConfig {
        name: "probe".into(),
        key: Some(Secret::new(API_KEY)),
        key_env: None,
        person: "probe".into(),
    }];
    c
}

/// How a request reaches the listener, besides its token: straight from a local client, through
/// a proxy (one forwarding header), or from a browser on a hostile page — a DNS-rebinding name
/// in `Host`, a foreign `Origin`, or `Sec-Fetch-Site: cross-site`.
#[derive(Debug, Clone, Copy)]
enum Via {
    Direct,
    Proxy(&'static str),
    RebindHost,
    ForeignOrigin,
    CrossSiteFetch,
}

impl Via {
    fn all() -> Vec<Via> {
        let mut v = vec![
            Via::Direct,
            Via::RebindHost,
            Via::ForeignOrigin,
            Via::CrossSiteFetch,
        ];
        v.extend(herald::http::PROXY_HEADERS.iter().map(|h| Via::Proxy(h)));
        v
    }

    fn apply(self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Via::Direct => req,
            Via::Proxy(h) => req.header(h, "203.0.113.7"),
            Via::RebindHost => req.header("Host", "evil.attacker.example"),
            Via::ForeignOrigin => req.header("Origin", "http://evil.attacker.example"),
            Via::CrossSiteFetch => req.header("Sec-Fetch-Site", "cross-site"),
        }
    }

    /// Whether a request this way may be the local operator (given loopback is trusted).
    fn local(self, method: &Method) -> bool {
        let state_changing = !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
        match self {
            Via::Direct => true,
            Via::Proxy(_) | Via::RebindHost => false,
            Via::ForeignOrigin | Via::CrossSiteFetch => !state_changing,
        }
    }
}

/// The policy the page shells are sent with (the chat page's script and style are inline).
const PAGE_CSP: &str = "default-src 'self'; script-src 'self' 'unsafe-inline'; \
    style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; \
    frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// Every response cannot be framed or sniffed and leaks no referrer; the pages get the CSP.
fn assert_framing_headers(resp: &reqwest::Response, what: &str) {
    let h = |n: &str| {
        resp.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(h("x-frame-options"), "DENY", "{what}");
    assert_eq!(h("content-security-policy"), PAGE_CSP, "{what}");
    assert_eq!(h("x-content-type-options"), "nosniff", "{what}");
    assert_eq!(h("referrer-policy"), "no-referrer", "{what}");
}

/// Every route of the table × listen address × token absent/wrong/right × how the request
/// comes (direct, each forwarding header, a rebinding Host, a foreign Origin, a cross-site
/// fetch): an `Api` route answers 401 unless the right token is sent, or no token is
/// configured and the request is a trusted local one; an `Open` route never asks. Routes of a
/// disabled feature do not exist.
#[tokio::test]
async fn every_route_answers_only_the_people_it_belongs_to() {
    init();
    let llm = FakeLlm::start().await;
    let shapes = [
        Shape {
            listen: "127.0.0.1:0",
            token: false,
            trust_loopback: None,
            web: true,
        },
        Shape {
            listen: "127.0.0.1:0",
            token: true,
            trust_loopback: None,
            web: true,
        },
        Shape {
            listen: "127.0.0.1:0",
            token: true,
            trust_loopback: Some(false),
            web: true,
        },
        Shape {
            listen: "0.0.0.0:0",
            token: true,
            trust_loopback: None,
            web: true,
        },
        Shape {
            listen: "0.0.0.0:0",
            token: true,
            trust_loopback: None,
            web: false,
        },
        Shape {
            listen: "127.0.0.1:0",
            token: false,
            trust_loopback: None,
            web: false,
        },
    ];
    let http = reqwest::Client::new();
    let mut checked = 0;
    let mut pages = 0;
    for shape in &shapes {
        let data = tempfile::tempdir().unwrap();
        let config = config_for(shape, &llm, &data);
        herald::config::validate(&config).expect("a valid shape");
        let rows = table(&config);
        let app = App::start(config).await.unwrap();
        let base = format!("http://127.0.0.1:{}", app.addr.port());
        let trusted_default = shape.listen.starts_with("127.");
        for r in &rows {
            let path = r
                .path
                .replace("{lane}", "web:probe")
                .replace("{id}", "nope")
                .replace("{sha}", "nope")
                .replace("{name}", "probe-hook");
            for cred in [Cred::None, Cred::Wrong, Cred::Right, Cred::ApiKey] {
                for via in Via::all() {
                    let mut req = http.request(r.method.clone(), format!("{base}{path}"));
                    req = match cred {
                        Cred::None => req,
                        Cred::Wrong => req.bearer_auth("not-the-token"),
                        Cred::Right => req.bearer_auth(TOKEN),
                        Cred::ApiKey => req.bearer_auth(API_KEY),
                    };
                    req = via.apply(req);
                    if r.method == Method::POST {
                        req = req.json(&json!({}));
                    }
                    let resp = req.send().await.unwrap();
                    let status = resp.status().as_u16();
                    let what = format!(
                        "{} {} listen {} token {} web {} cred {cred:?} via {via:?}",
                        r.method, r.path, shape.listen, shape.token, shape.web
                    );
                    assert_framing_headers(&resp, &what);
                    if r.path == "/" || r.path == "/admin" {
                        pages += 1;
                    }
                    // A live stream (the web chat's events) never ends: its headers answer.
                    let streaming = resp
                        .headers()
                        .get("content-type")
                        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
                    let body = if streaming {
                        String::new()
                    } else {
                        resp.text().await.unwrap_or_default()
                    };
                    let what = format!("{what}: {status} {body}");
                    let trusted =
                        shape.trust_loopback.unwrap_or(trusted_default) && via.local(&r.method);
                    let admitted = match (r.guard, shape.token, cred) {
                        (Guard::Open, _, _) => true,
                        (Guard::Api, true, Cred::Right) => true,
                        (Guard::Api, true, _) => false,
                        (Guard::Api, false, _) => trusted,
                        (Guard::ApiKey, _, Cred::ApiKey) => true,
                        (Guard::ApiKey, _, _) => false,
                        // Only the hook's own signature, which no probe carries.
                        (Guard::Signed, _, _) => false,
                    };
                    if admitted {
                        assert_ne!(status, 401, "{what}");
                        assert_ne!(status, 405, "{what}");
                        // A 404 here must be the handler's own ("no such session"), not a
                        // missing route.
                        assert!(status != 404 || body.contains("error"), "{what}");
                    } else if r.guard == Guard::Signed && !shape.web {
                        // `/hooks/{name}` is always mounted; this shape has no hook of that name.
                        assert_eq!(status, 404, "{what}");
                        assert!(body.contains("no such hook"), "{what}");
                    } else {
                        assert_eq!(status, 401, "{what}");
                        assert!(!body.contains("probe"), "{what}");
                    }
                    checked += 1;
                }
            }
        }
        // A disabled web chat has no page and no chat route at all: nothing is stored.
        if !shape.web {
            for (method, path) in [(Method::GET, "/"), (Method::POST, "/api/v1/chat")] {
                let resp = http
                    .request(method.clone(), format!("{base}{path}"))
                    .bearer_auth(TOKEN)
                    .json(&json!({"lane": "web:x", "text": "hi"}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.status().as_u16(), 404, "{method} {path} with web off");
            }
            assert!(app.store.lanes_overview(10).await.unwrap().is_empty());
        }
        app.shutdown().await;
    }
    assert!(checked > 3000, "only {checked} probes");
    assert!(pages > 100, "only {pages} page probes");
    assert_eq!(llm.request_count(), 0, "no probe ran a turn");
}

/// The routes the table declares are the routes the source mounts: an axum `.route(` call
/// anywhere but the table's loop would bypass the guard.
#[test]
fn no_route_is_mounted_outside_the_table() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stack = vec![root];
    let mut offenders = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let rel = path.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap();
            let allowed: &[&str] = match rel.to_str().unwrap() {
                // The table's own loop.
                "src/http/mod.rs" => &["app.route(r.path, handler)"],
                // The Telegram webhook checks its own secret header (tested in e2e_telegram).
                "src/adapters/telegram/webhook.rs" => &[".route("],
                // Slack's Events API routes check Slack's request signature themselves (every
                // route refuses an unsigned, stale or forged post: e2e_slack/events_api.rs).
                "src/adapters/slack/events.rs" => &[".route("],
                // The WhatsApp webhook checks Meta's X-Hub-Signature-256 itself (an unsigned or
                // forged post is 401: e2e_whatsapp.rs).
                "src/adapters/whatsapp/webhook.rs" => &[".route("],
                _ => &[],
            };
            for (n, line) in text.lines().enumerate() {
                if line.contains(".route(") && !allowed.iter().any(|a| line.contains(a)) {
                    offenders.push(format!("{}:{}: {}", rel.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "routes mounted outside http::table (add a row with its Guard instead):\n{}",
        offenders.join("\n")
    );
}

/// The admin API is on whether or not the web chat is: a public listener without a token is
/// refused at start, and so is an empty token.
#[test]
fn a_public_listener_without_a_token_does_not_start() {
    let data = tempfile::tempdir().unwrap();
    for (env, want) in [
        (
            vec![("HERALD_WEB__ENABLED", "false")],
            "web.token: required",
        ),
        (vec![("HERALD_WEB__TOKEN", "")], "web.token"),
    ] {
        let out = Herald::new()
            .args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
            .arg(data.path())
            .envs(env.iter().cloned())
            .output();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{env:?} started");
        assert!(stderr.contains(want), "{env:?}: {stderr}");
    }
}
