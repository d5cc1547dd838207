//! `/metrics` as a Prometheus scraper reads it, after a scripted conversation: the counters an
//! operator alerts on move by exactly the amounts the conversation implies.
//!
//! Its own test binary, outside `tests/it/`: the Prometheus recorder is process-global, and
//! the exact deltas and gauges asserted here would count the turns and outbox rows of every
//! other app running in the same process.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use herald::app::App;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::{init, test_config, Client};

type Labels<'a> = &'a [(&'a str, &'a str)];

/// One scrape: (metric name, labels) → value.
struct Scrape(Vec<(String, BTreeMap<String, String>, f64)>);

impl Scrape {
    /// Parses the Prometheus text exposition format (comments, labels with escapes, values).
    fn parse(text: &str) -> Scrape {
        let mut out = Vec::new();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, rest) = match line.find(['{', ' ']) {
                Some(i) => line.split_at(i),
                None => panic!("bad sample line: {line}"),
            };
            let mut labels = BTreeMap::new();
            let mut rest = rest;
            if let Some(body) = rest.strip_prefix('{') {
                let mut chars = body.char_indices();
                let mut key = String::new();
                let end = loop {
                    let (i, c) = chars.next().expect("unterminated labels");
                    match c {
                        '}' => break i,
                        ',' | ' ' => {}
                        '=' => {
                            assert_eq!(chars.next().map(|(_, c)| c), Some('"'), "{line}");
                            let mut value = String::new();
                            loop {
                                match chars.next().expect("unterminated value").1 {
                                    '\\' => match chars.next().expect("escape").1 {
                                        'n' => value.push('\n'),
                                        c => value.push(c),
                                    },
                                    '"' => break,
                                    c => value.push(c),
                                }
                            }
                            labels.insert(std::mem::take(&mut key), value);
                        }
                        c => key.push(c),
                    }
                };
                rest = &body[end + 1..];
            }
            let value = rest.split_whitespace().next().expect("value");
            let value = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("bad value in {line}")),
            };
            out.push((name.to_string(), labels, value));
        }
        Scrape(out)
    }

    /// Sum over the series of `name` whose labels include all of `want`.
    fn get(&self, name: &str, want: &[(&str, &str)]) -> f64 {
        self.0
            .iter()
            .filter(|(n, labels, _)| {
                n == name
                    && want
                        .iter()
                        .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|(_, _, v)| v)
            .sum()
    }

    fn names(&self) -> Vec<&str> {
        self.0.iter().map(|(n, _, _)| n.as_str()).collect()
    }
}

async fn scrape(client: &Client) -> Scrape {
    let (status, text) = client.get("/metrics").await;
    assert_eq!(status, 200);
    Scrape::parse(&text)
}

#[test]
fn the_parser_reads_labels_escapes_and_infinities() {
    let s = Scrape::parse(
        "# HELP x_total a counter\n# TYPE x_total counter\n\
         x_total{a=\"1\",b=\"q\\\"uote, }\"} 3\nx_total{a=\"2\"} 4.5\n\
         h_bucket{le=\"+Inf\"} 7\nplain 1e3\n",
    );
    assert_eq!(s.get("x_total", &[]), 7.5);
    assert_eq!(s.get("x_total", &[("b", "q\"uote, }")]), 3.0);
    assert_eq!(s.get("h_bucket", &[("le", "+Inf")]), 7.0);
    assert_eq!(s.get("plain", &[]), 1000.0);
}

#[tokio::test]
async fn a_scripted_conversation_moves_the_counters_by_the_right_amounts() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let client = Client::new(&app);
    let before = scrape(&client).await;

    // 1. A slow turn: while it runs, its message is queued on an active lane.
    llm.push(Step::Delay(
        Duration::from_millis(1500),
        Box::new(Step::Reply("slow answer".into())),
    ));
    let slow = {
        let base = client.base.clone();
        tokio::spawn(async move { Client::for_addr(&base[7..]).chat("web:m1", "one").await })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mid = loop {
        let s = scrape(&client).await;
        // The lease is taken before the turn registers as running: wait for both.
        if s.get("herald_lane_queue_depth", &[("state", "active")]) >= 1.0
            && s.get("herald_lanes_busy", &[]) >= 1.0
        {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the active lane's queue never showed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(mid.get("herald_lanes", &[("state", "active")]), 1.0);
    assert_eq!(mid.get("herald_lanes_busy", &[]), 1.0);
    assert_eq!(slow.await.unwrap().1["reply"], "slow answer");

    // 2. A rate limit, retried once, then an answer.
    llm.push(Step::Status(
        429,
        vec![("Retry-After".into(), "0".into())],
        String::new(),
    ));
    assert_eq!(
        client.chat("web:m1", "two").await.1["reply"],
        "reply to: two"
    );
    // 3. A refusal: the turn fails and the user gets an error line.
    llm.push(Step::Status(401, vec![], "{\"error\":\"bad key\"}".into()));
    let (_, failed) = client.chat("web:m1", "three").await;
    assert!(failed["reply"].as_str().unwrap().contains("refused"));

    // 4. A lane whose previous holder died (its lease ran out without a release).
    let ghost = app
        .store
        .lease_acquire("web:m2", "dead-replica/1", Duration::from_millis(1))
        .await
        .unwrap();
    assert!(ghost.is_some());
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        client.chat("web:m2", "four").await.1["reply"],
        "reply to: four"
    );

    // The sender records deliveries just after the reply: wait for all four, counted and
    // stored (a scrape reads the store's gauges before it renders the counters, so one scrape
    // can see a send counted whose row it read a moment earlier as `sending`).
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        let s = scrape(&client).await;
        if s.get("herald_outbox_sent_total", &[("platform", "web")])
            - before.get("herald_outbox_sent_total", &[("platform", "web")])
            >= 4.0
            && s.get("herald_outbox_rows", &[("status", "sent")]) >= 4.0
        {
            break s;
        }
        assert!(Instant::now() < deadline, "deliveries never recorded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let delta =
        |name: &str, labels: &[(&str, &str)]| after.get(name, labels) - before.get(name, labels);

    let web = ("platform", "web");
    let provider = ("provider", "openai:fake-model");
    let table: &[(&str, Labels, f64)] = &[
        ("herald_inbound_events_total", &[web], 4.0),
        ("herald_turns_total", &[web, ("status", "done")], 3.0),
        ("herald_turns_total", &[web, ("status", "failed")], 1.0),
        ("herald_turn_duration_seconds_count", &[web], 4.0),
        (
            "herald_llm_calls_total",
            &[provider, ("outcome", "ok")],
            3.0,
        ),
        (
            "herald_llm_calls_total",
            &[provider, ("outcome", "rejected")],
            1.0,
        ),
        (
            "herald_llm_retries_total",
            &[provider, ("class", "rate_limited")],
            1.0,
        ),
        // The fake bills 120 prompt tokens (100 of them cached) and 8 output tokens per call.
        (
            "herald_llm_tokens_total",
            &[provider, ("bucket", "fresh_input")],
            60.0,
        ),
        (
            "herald_llm_tokens_total",
            &[provider, ("bucket", "cache_read")],
            300.0,
        ),
        (
            "herald_llm_tokens_total",
            &[provider, ("bucket", "output")],
            24.0,
        ),
        ("herald_lease_acquired_total", &[("kind", "takeover")], 1.0),
        ("herald_lease_lost_total", &[], 0.0),
        ("herald_outbox_sent_total", &[web], 4.0),
        ("herald_outbox_failed_total", &[web], 0.0),
        ("herald_platform_send_errors_total", &[], 0.0),
    ];
    for (name, labels, want) in table {
        assert_eq!(delta(name, labels), *want, "{name}{labels:?}");
    }
    // The slow turn is above the 1 s bucket; the others are below it.
    let fast = delta("herald_turn_duration_seconds_bucket", &[web, ("le", "1")]);
    assert_eq!(fast, 3.0);
    assert_eq!(after.get("herald_outbox_rows", &[("status", "sent")]), 4.0);
    assert_eq!(
        after.get("herald_outbox_rows", &[("status", "pending")]),
        0.0
    );
    assert_eq!(after.get("herald_lane_queue_depth", &[]), 0.0);
    assert!(
        after.names().iter().all(|n| n.starts_with("herald_")),
        "every metric is prefixed herald_: {:?}",
        after.names()
    );
    app.shutdown().await;
}
