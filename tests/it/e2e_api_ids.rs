//! Ids that leave the process are random: a completion's and a response's id say nothing of
//! how many requests came before (they were `chatcmpl-18`, `resp_5`), a retry of the same
//! request reads the same id, and `previous_response_id` still continues a conversation —
//! by its random id only.

use herald_test_support::harness::start_api;
use serde_json::{json, Value};

const KEY: &str = "sk-herald-ids-0123456789";

fn random_part<'a>(id: &'a str, prefix: &str) -> &'a str {
    let rest = id
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("{id} lacks {prefix}"));
    assert!(
        rest.len() == 24 && rest.chars().all(|c| c.is_ascii_alphanumeric()),
        "{id}"
    );
    assert!(rest.parse::<u64>().is_err(), "a number: {id}");
    rest
}

#[tokio::test]
async fn response_ids_are_random_and_still_chain() {
    let (llm, app, _data) = start_api(KEY, |_| {}).await;
    let http = reqwest::Client::new();
    let base = format!("http://{}", app.addr);
    let post = |path: &'static str, body: Value| {
        let req = http
            .post(format!("{base}{path}"))
            .bearer_auth(KEY)
            .json(&body);
        async move {
            let r = req.send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap())
        }
    };
    let chat = |text: &str| json!({"model": "herald", "user": "ids", "messages": [{"role": "user", "content": text}]});

    let (s1, a) = post("/v1/chat/completions", chat("one")).await;
    let (s2, b) = post("/v1/chat/completions", chat("two")).await;
    assert_eq!((s1, s2), (200, 200), "{a} {b}");
    let (ia, ib) = (a["id"].as_str().unwrap(), b["id"].as_str().unwrap());
    assert_ne!(random_part(ia, "chatcmpl-"), random_part(ib, "chatcmpl-"));
    // The same request again (an SDK retry) is the same request, with the same id.
    let (_, again) = post("/v1/chat/completions", chat("one")).await;
    assert_eq!(again["id"], a["id"]);

    let (status, first) = post(
        "/v1/responses",
        json!({"model": "herald", "input": "Remember the number 42."}),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    let id = first["id"].as_str().unwrap();
    let random = random_part(id, "resp_");
    assert_eq!(first["output"][0]["id"], format!("msg_{random}"));
    let (status, next) = post(
        "/v1/responses",
        json!({"model": "herald", "input": "Which number?", "previous_response_id": id}),
    )
    .await;
    assert_eq!(status, 200, "{next}");
    assert_eq!(next["previous_response_id"], id);
    let chained = llm.last_request();
    assert!(
        chained
            .messages()
            .iter()
            .any(|m| herald_test_support::fake_llm::text_of(m).contains("Remember the number 42.")),
        "the chained request holds the first exchange"
    );
    // A counter is no id: the rows are 1..=4, none of them answers to its number.
    for n in 1..=4 {
        let (status, body) = post(
            "/v1/responses",
            json!({"model": "herald", "input": "peek", "previous_response_id": format!("resp_{n}")}),
        )
        .await;
        assert_eq!(status, 404, "{body}");
        assert_eq!(body["error"]["code"], "response_not_found");
    }
    app.shutdown().await;
}
