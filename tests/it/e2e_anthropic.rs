//! End to end on the native Anthropic provider: the real core with `[llm] provider =
//! "anthropic"` against the fake Messages API (headers, block shapes, breakpoint count,
//! Anthropic's billing with simulated prompt caching), through the web chat.

use std::time::Duration;

use herald::app::App;
use herald::config::{Config, ConfigUrl, Endpoint, ProviderKind, Secret};
use herald::domain::LaneKey;
use herald_test_support::fake_anthropic::{FakeAnthropic, Step, KEY, MAX_BREAKPOINTS};
use herald_test_support::fake_llm::{self, FakeLlm};
use herald_test_support::harness::{init, test_config, Client};

fn anthropic_config(fake: &FakeAnthropic, llm: &FakeLlm, data: &tempfile::TempDir) -> Config {
    let mut c = test_config(llm, data);
    c.llm.provider = ProviderKind::Anthropic;
    c.llm.base_url = Some(fake.base_url().parse().unwrap());
    c.llm.api_key = Some(Secret::new(KEY.to_string()));
    c.llm.model = Some("claude-fake".into());
    c.llm.context_window = Some(200_000);
    c
}

fn endpoint(provider: Option<ProviderKind>, url: &str, key: Option<&str>, model: &str) -> Endpoint {
    Endpoint {
        provider,
        base_url: Some(ConfigUrl::parse(url).unwrap()),
        api_key: key.map(|k| Secret::new(k.to_string())),
        model: model.into(),
        api_key_from: None,
    }
}

#[tokio::test]
async fn a_multi_turn_chat_with_a_tool_reads_the_cache_from_the_second_turn() {
    init();
    let (fake, llm) = (FakeAnthropic::start().await, FakeLlm::start().await);
    let data = tempfile::tempdir().unwrap();
    let app = App::start(anthropic_config(&fake, &llm, &data))
        .await
        .unwrap();
    let client = Client::new(&app);

    fake.push(Step::Tools(
        Some("Let me look.".into()),
        vec![
            ("session_search".into(), r#"{"query":"deploy"}"#.into()),
            ("session_search".into(), r#"{"query":"rollback"}"#.into()),
        ],
    ));
    fake.push(Step::Reply("Nothing found about deploys.".into()));
    let (status, body) = client
        .chat("web:claude", "Did we talk about deploys?")
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "Nothing found about deploys.");
    for text in ["Second question", "Third question"] {
        let (_, body) = client.chat("web:claude", text).await;
        assert_eq!(body["reply"], format!("reply to: {text}"));
    }

    let reqs = fake.requests();
    assert_eq!(reqs.len(), 4, "tool call, answer, two turns");
    for r in &reqs {
        assert_eq!(r.refused, None, "the fake refused {}", r.body);
        assert_eq!(r.api_key.as_deref(), Some(KEY));
        assert_eq!(r.version.as_deref(), Some("2023-06-01"));
        assert_eq!(r.body["max_tokens"], 4096);
        assert!(r.breakpoints() <= MAX_BREAKPOINTS);
        assert_eq!(r.system_json(), reqs[0].system_json(), "system bytes moved");
        assert_eq!(r.body["system"][0]["cache_control"]["type"], "ephemeral");
    }
    // Both calls answered in one user message of tool_result blocks, right after the calls.
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    let results = &msgs[msgs.len() - 1]["content"];
    assert_eq!(results[0]["type"], "tool_result");
    assert_eq!(results[1]["type"], "tool_result");
    assert_eq!(msgs[msgs.len() - 2]["content"][2]["type"], "tool_use");
    // The first request writes; every later one reads what the one before it wrote.
    assert_eq!(reqs[0].bill.cache_read, 0);
    assert!(reqs[0].bill.cache_write > 0);
    for pair in reqs.windows(2) {
        assert!(
            pair[1].bill.cache_read >= pair[0].bill.cache_read + pair[0].bill.cache_write,
            "{:?} then {:?}",
            pair[0].bill,
            pair[1].bill
        );
    }
    // The stored anchor is the billed prompt: fresh input plus both cache parts.
    let lane = LaneKey::new("web:claude");
    let session = app.store.session_current(&lane).await.unwrap().unwrap();
    let row = app.store.context_get(&session.id).await.unwrap().unwrap();
    let last = reqs[3].bill;
    assert_eq!(row.prompt_tokens_anchor, Some(last.prompt() as i64));
    assert!(
        last.input < last.prompt() / 2,
        "most of the prompt is cached: {last:?}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn streamed_answers_work_and_thinking_is_never_stored() {
    init();
    let (fake, llm) = (FakeAnthropic::start().await, FakeLlm::start().await);
    let data = tempfile::tempdir().unwrap();
    let mut c = anthropic_config(&fake, &llm, &data);
    c.streaming.enabled = Some(true);
    let app = App::start(c).await.unwrap();
    let client = Client::new(&app);
    fake.push(Step::ThinkThenReply(
        "secret musings".into(),
        "Plain answer.".into(),
    ));
    let (_, body) = client.chat("web:think", "think about it").await;
    assert_eq!(body["reply"], "Plain answer.");
    let (_, body) = client.chat("web:think", "again").await;
    assert_eq!(body["reply"], "reply to: again");
    let reqs = fake.requests();
    assert!(
        !reqs[1].body.to_string().contains("secret musings"),
        "thinking replayed"
    );
    let transcript = client.transcript("web:think").await;
    assert!(transcript
        .iter()
        .all(|(_, t)| !t.contains("secret musings")));
    app.shutdown().await;
}

#[tokio::test]
async fn rate_limits_and_overload_are_retried_then_fall_back_to_openai_compatible() {
    init();
    let (fake, llm) = (FakeAnthropic::start().await, FakeLlm::start().await);
    let data = tempfile::tempdir().unwrap();
    let mut c = anthropic_config(&fake, &llm, &data);
    c.llm.max_retries = 1;
    c.llm.fallbacks = vec![endpoint(None, &llm.base_url(), None, "fake-model")];
    let app = App::start(c).await.unwrap();
    let client = Client::new(&app);

    fake.push(Step::rate_limited(1));
    let started = std::time::Instant::now();
    let (_, body) = client.chat("web:busy", "hello").await;
    assert_eq!(body["reply"], "reply to: hello");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "retry-after honoured"
    );
    assert_eq!(fake.requests().len(), 2);
    assert_eq!(llm.request_count(), 0);

    fake.push(Step::overloaded());
    fake.push(Step::overloaded());
    let (_, body) = client.chat("web:busy", "still there?").await;
    assert_eq!(
        body["reply"], "reply to: still there?",
        "the fallback answered"
    );
    assert_eq!(fake.requests().len(), 4, "one try and one retry");
    assert_eq!(llm.request_count(), 1);
    app.shutdown().await;
}

#[tokio::test]
async fn a_refused_key_fails_fast_and_an_overflow_is_compacted_once() {
    init();
    let (fake, llm) = (FakeAnthropic::start().await, FakeLlm::start().await);
    let data = tempfile::tempdir().unwrap();
    let mut c = anthropic_config(&fake, &llm, &data);
    c.llm.api_key = Some(Secret::new("sk-ant-wrong-key-000000".to_string()));
    let app = App::start(c).await.unwrap();
    let client = Client::new(&app);
    let (_, body) = client.chat("web:key", "hello").await;
    let reply = body["reply"].as_str().unwrap_or_default();
    assert!(reply.contains("HTTP 401"), "{body}");
    assert!(!reply.contains("sk-ant-wrong"), "{body}");
    assert_eq!(fake.requests().len(), 1, "a refused key is not retried");
    app.shutdown().await;

    let data = tempfile::tempdir().unwrap();
    let mut c = anthropic_config(&fake, &llm, &data);
    c.llm.context_window = Some(32_768);
    let app = App::start(c).await.unwrap();
    let client = Client::new(&app);
    for i in 0..8 {
        let long = format!("step {i}: {}", "the deploy log says ok. ".repeat(150));
        client.chat("web:long", &long).await;
    }
    let before = fake.requests().len();
    fake.push(Step::too_long());
    fake.push(Step::too_long());
    let (_, body) = client.chat("web:long", "one more").await;
    let reply = body["reply"].as_str().unwrap_or_default();
    assert!(
        reply.contains("no longer fits") && reply.contains("/new"),
        "{body}"
    );
    assert_eq!(
        fake.requests().len(),
        before + 2,
        "retried once after compacting"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn openai_compatible_main_falls_back_to_anthropic() {
    init();
    let (fake, llm) = (FakeAnthropic::start().await, FakeLlm::start().await);
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    c.llm.max_retries = 0;
    c.llm.fallbacks = vec![endpoint(
        Some(ProviderKind::Anthropic),
        &fake.base_url(),
        Some(KEY),
        "claude-fake",
    )];
    let app = App::start(c).await.unwrap();
    let client = Client::new(&app);
    llm.push(fake_llm::Step::Status(503, Vec::new(), "down".into()));
    let (_, body) = client.chat("web:fb", "anyone?").await;
    assert_eq!(body["reply"], "reply to: anyone?");
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].refused, None);
    assert_eq!(reqs[0].body["model"], "claude-fake");
    app.shutdown().await;
}

#[tokio::test]
async fn the_capsule_writer_can_be_anthropic() {
    init();
    let (fake, llm) = (FakeAnthropic::start().await, FakeLlm::start().await);
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    c.handoff.writer = vec![endpoint(
        Some(ProviderKind::Anthropic),
        &fake.base_url(),
        Some(KEY),
        "claude-writer",
    )];
    let app = App::start(c).await.unwrap();
    let client = Client::new(&app);
    for text in [
        "The nightly mirror job fails on the second host.",
        "Make it skip unreachable hosts and report which one.",
    ] {
        client.chat("web:h", text).await;
    }
    fake.push(Step::Reply(
        "## Working on\nThe mirror job.\n\n## State\nHalf done.\n\n## Decisions\nSkip.\n\n\
         ## Pointers\nmirror.sh\n\n## Next\nReport the host.\n"
            .into(),
    ));
    client.chat("web:h", "Handoff.").await;
    let capsule =
        herald_test_support::harness::wait_for("a capsule", Duration::from_secs(20), async || {
            let (status, body) = client.get("/api/v1/lanes/web:h/capsule").await;
            (status == 200).then(|| serde_json::from_str::<serde_json::Value>(&body).unwrap())
        })
        .await;
    assert_eq!(capsule["status"], "ok", "{capsule}");
    assert!(capsule["text"]
        .as_str()
        .unwrap()
        .starts_with("## Working on\nThe mirror job."));
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1, "the writer call went to Anthropic");
    assert_eq!(reqs[0].refused, None);
    assert_eq!(reqs[0].body["model"], "claude-writer");
    assert!(reqs[0]
        .body
        .to_string()
        .contains("Make it skip unreachable hosts"));
    app.shutdown().await;
}
