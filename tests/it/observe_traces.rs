//! OpenTelemetry export end to end: the real `herald` binary with `telemetry.otlp_endpoint`
//! pointed at a local OTLP/HTTP collector stub, one conversation turn with a tool call, then
//! SIGTERM (spans are flushed last). The stub decodes the protobuf and the test checks the
//! turn's trace: one root `turn` span and its children.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::routing::post;
use axum::Router;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::init;
use herald_test_support::herald::Herald;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use prost::Message;
use serde_json::json;

#[derive(Debug, Clone)]
struct Span {
    name: String,
    trace: Vec<u8>,
    id: Vec<u8>,
    parent: Vec<u8>,
    attrs: HashMap<String, String>,
}

fn text(kv: &KeyValue) -> String {
    match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

/// Starts the collector stub; returns its base URL and what it received.
async fn collector() -> (String, Arc<Mutex<Vec<ExportTraceServiceRequest>>>) {
    let got: Arc<Mutex<Vec<ExportTraceServiceRequest>>> = Arc::default();
    let sink = got.clone();
    let app = Router::new().route(
        "/v1/traces",
        post(move |body: Bytes| {
            let sink = sink.clone();
            async move {
                let req = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                sink.lock().unwrap().push(req);
                (
                    [("content-type", "application/x-protobuf")],
                    Vec::<u8>::new(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_per_turn_with_its_children_reaches_the_collector() {
    init();
    let llm = FakeLlm::start().await;
    llm.push(Step::ToolCall(
        "session_search".into(),
        r#"{"query":"weather"}"#.into(),
    ));
    let (endpoint, got) = collector().await;
    let data = tempfile::tempdir().unwrap();
    let mut child = Herald::serve_anywhere(data.path())
        .fake_model(&llm.base_url())
        .env("HERALD_TELEMETRY__OTLP_ENDPOINT", &endpoint)
        .env("HERALD_TELEMETRY__SERVICE_NAME", "herald-test")
        .env("HERALD_LOG__LEVEL", "warn")
        .spawn();
    child.wait_ready(Duration::from_secs(30)).await;
    let base = child.base_url();
    let reply: serde_json::Value = reqwest::Client::new()
        .post(format!("{base}/api/v1/chat"))
        .json(&json!({"lane": "web:traced", "text": "what about the weather?"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(reply["reply"], "reply to: what about the weather?");
    // Let the sender deliver, then stop: the shutdown flushes what the batch still holds.
    tokio::time::sleep(Duration::from_millis(500)).await;
    child.terminate();
    child.wait_exit(Duration::from_secs(30)).await;

    let requests = got.lock().unwrap().clone();
    assert!(!requests.is_empty(), "the collector received nothing");
    let mut spans = Vec::new();
    for req in &requests {
        for rs in &req.resource_spans {
            let service = rs
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
                .map(text);
            assert_eq!(service.as_deref(), Some("herald-test"));
            for ss in &rs.scope_spans {
                for s in &ss.spans {
                    spans.push(Span {
                        name: s.name.clone(),
                        trace: s.trace_id.clone(),
                        id: s.span_id.clone(),
                        parent: s.parent_span_id.clone(),
                        attrs: s
                            .attributes
                            .iter()
                            .map(|a| (a.key.clone(), text(a)))
                            .collect(),
                    });
                }
            }
        }
    }
    let turns: Vec<&Span> = spans.iter().filter(|s| s.name == "turn").collect();
    assert_eq!(turns.len(), 1, "one turn, one turn span");
    let turn = turns[0];
    assert!(turn.parent.is_empty(), "the turn span is a trace root");
    assert_eq!(
        turn.attrs.get("lane").map(String::as_str),
        Some("web:traced")
    );
    assert!(
        turn.attrs.get("session").is_some_and(|s| !s.is_empty()),
        "{turn:?}"
    );
    assert!(turn.attrs.contains_key("turn"), "{turn:?}");

    let in_trace: Vec<&Span> = spans.iter().filter(|s| s.trace == turn.trace).collect();
    // Every span of the trace hangs off the turn span, directly or through a parent.
    let by_id: HashMap<&[u8], &Span> = in_trace.iter().map(|s| (s.id.as_slice(), *s)).collect();
    for s in &in_trace {
        let mut at = *s;
        while !at.parent.is_empty() {
            at = by_id
                .get(at.parent.as_slice())
                .unwrap_or_else(|| panic!("{} has a parent outside the trace", s.name));
        }
        assert_eq!(at.name, "turn");
    }
    let mut names: Vec<&str> = in_trace.iter().map(|s| s.name.as_str()).collect();
    names.sort();
    for want in [
        "hooks.pre_llm",
        "lease.turn_begin",
        "store.session",
        "store.turn_commit",
        "tool",
        "turn",
    ] {
        assert!(
            names.contains(&want),
            "no {want} span in the turn's trace: {names:?}"
        );
    }
    let calls: Vec<&&Span> = in_trace.iter().filter(|s| s.name == "llm.call").collect();
    assert_eq!(calls.len(), 2, "the tool call and the answer: {names:?}");
    for c in calls {
        assert_eq!(c.attrs.get("outcome").map(String::as_str), Some("ok"));
        assert_eq!(
            c.attrs.get("gen_ai.usage.input_tokens").map(String::as_str),
            Some("120")
        );
        assert_eq!(
            c.attrs
                .get("gen_ai.usage.output_tokens")
                .map(String::as_str),
            Some("8")
        );
        assert_eq!(
            c.attrs.get("provider").map(String::as_str),
            Some("openai:fake-model")
        );
    }
    let tool = in_trace.iter().find(|s| s.name == "tool").unwrap();
    assert_eq!(
        tool.attrs.get("name").map(String::as_str),
        Some("session_search")
    );

    // The send is its own trace, tied to the turn by the inbox id.
    let send = spans
        .iter()
        .find(|s| s.name == "send")
        .expect("a send span");
    assert!(send.parent.is_empty());
    assert_eq!(send.attrs.get("inbox_id"), turn.attrs.get("inbox_id"));
    assert_eq!(
        send.attrs.get("lane").map(String::as_str),
        Some("web:traced")
    );
}

/// Every span the collector received.
fn received(requests: &[ExportTraceServiceRequest]) -> Vec<Span> {
    let mut spans = Vec::new();
    for rs in requests.iter().flat_map(|r| &r.resource_spans) {
        for s in rs.scope_spans.iter().flat_map(|ss| &ss.spans) {
            spans.push(Span {
                name: s.name.clone(),
                trace: s.trace_id.clone(),
                id: s.span_id.clone(),
                parent: s.parent_span_id.clone(),
                attrs: s
                    .attributes
                    .iter()
                    .map(|a| (a.key.clone(), text(a)))
                    .collect(),
            });
        }
    }
    spans
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_child_agent_is_a_span_of_its_parent_turn_with_its_own_model_calls() {
    init();
    let llm = FakeLlm::start().await;
    let goal = "read the weather station log";
    llm.push_when(
        "how is the weather station?",
        Step::ToolCall("delegate".into(), json!({"goal": goal}).to_string()),
    );
    llm.push_when(goal, Step::Reply("The log says all is well.".into()));
    let (endpoint, got) = collector().await;
    let data = tempfile::tempdir().unwrap();
    let mut child = Herald::serve_anywhere(data.path())
        .fake_model(&llm.base_url())
        .env("HERALD_TELEMETRY__OTLP_ENDPOINT", &endpoint)
        .env("HERALD_LOG__LEVEL", "warn")
        .spawn();
    child.wait_ready(Duration::from_secs(30)).await;
    let base = child.base_url();
    let reply: serde_json::Value = reqwest::Client::new()
        .post(format!("{base}/api/v1/chat"))
        .json(&json!({"lane": "web:station", "text": "how is the weather station?"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(reply["reply"], "reply to: how is the weather station?");
    tokio::time::sleep(Duration::from_millis(500)).await;
    child.terminate();
    child.wait_exit(Duration::from_secs(30)).await;

    let spans = received(&got.lock().unwrap());
    let turn = spans
        .iter()
        .find(|s| s.name == "turn")
        .expect("a turn span");
    let kids: Vec<&Span> = spans.iter().filter(|s| s.name == "agent.child").collect();
    assert_eq!(kids.len(), 1, "one child agent");
    let kid = kids[0];
    assert_eq!(
        (&kid.trace, &kid.parent),
        (&turn.trace, &turn.id),
        "the child is a span of the parent turn"
    );
    assert!(kid.attrs.get("task_id").is_some_and(|t| t.len() == 32));
    // Its model call hangs under it, not beside the parent's own calls.
    let under_kid: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "llm.call" && s.parent == kid.id)
        .collect();
    assert_eq!(under_kid.len(), 1);
}
