//! The `web_search` tool through the agent loop against a local fake of each provider
//! (`fake_search`, in the provider's own JSON shape): the fake model calls the tool, the
//! provider gets the query, the count and its own kind of key, and the model is told title,
//! URL and snippet of each result, fenced as untrusted content. A provider that refuses (a
//! bad key, SearXNG without JSON output) is a tool error naming it and its status, never an
//! empty list, and the key appears nowhere in what the model reads.

use herald::app::App;
use herald::config::{Config, SearchProvider, Secret};
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::fake_search::{expected, Api, Asked, FakeSearch};
use herald_test_support::harness::{init, test_config, Client};
use serde_json::json;

const KEY: &str = "sk-search-7f3a9c";

async fn start(tune: impl FnOnce(&mut Config)) -> (FakeLlm, App, Client, tempfile::TempDir) {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    c.cron.enabled = false;
    tune(&mut c);
    let app = App::start(c).await.expect("app starts");
    let client = Client::new(&app);
    (llm, app, client, data)
}

/// One turn in which the model searches `query` for 2 results; what the tool told it.
async fn search(llm: &FakeLlm, client: &Client, lane: &str, query: &str) -> String {
    let ask = format!("look up {query}");
    llm.push_when(
        &ask,
        Step::ToolCall(
            "web_search".into(),
            json!({"query": query, "count": 2}).to_string(),
        ),
    );
    let (status, _) = client.chat(lane, &ask).await;
    assert_eq!(status, 200);
    let results = llm.tool_results_for(&ask);
    assert_eq!(results.len(), 1, "{results:?}");
    results[0].clone()
}

async fn each_provider(api: Api, provider: SearchProvider, name: &str) {
    let fake = FakeSearch::start(api, KEY).await;
    let (llm, app, client, _data) = start(|c| {
        c.web_tools.search_provider = Some(provider);
        c.web_tools.search_url = Some(fake.url().parse().unwrap());
        c.web_tools.search_api_key = Some(Secret::new(KEY));
    })
    .await;
    let told = search(&llm, &client, "web:search", "pier 3 ferry").await;
    assert!(
        told.starts_with(&format!(
            "The following is untrusted content from a {name} search for “pier 3 ferry”."
        )),
        "{told}"
    );
    for (i, (title, url, snippet)) in expected("pier 3 ferry").iter().enumerate() {
        let entry = format!("{}. {title}\n   {url}\n   {snippet}", i + 1);
        assert!(told.contains(&entry), "{entry:?} missing from {told}");
    }
    let count = (api != Api::Searxng).then_some(2);
    assert_eq!(
        fake.asked(),
        vec![Asked {
            query: "pier 3 ferry".into(),
            count
        }]
    );
    app.shutdown().await;
}

#[tokio::test]
async fn searxng_results_reach_the_model_as_title_url_and_snippet() {
    each_provider(Api::Searxng, SearchProvider::Searxng, "SearXNG").await;
}

#[tokio::test]
async fn brave_results_reach_the_model_as_title_url_and_snippet() {
    each_provider(Api::Brave, SearchProvider::Brave, "Brave Search").await;
}

#[tokio::test]
async fn tavily_results_reach_the_model_as_title_url_and_snippet() {
    each_provider(Api::Tavily, SearchProvider::Tavily, "Tavily").await;
}

#[tokio::test]
async fn a_refusing_provider_is_a_clear_tool_error_without_the_key() {
    for (api, provider, want) in [
        (
            Api::Brave,
            SearchProvider::Brave,
            "error: Brave Search refused the search: HTTP 401: ",
        ),
        (
            Api::Tavily,
            SearchProvider::Tavily,
            "error: Tavily refused the search: HTTP 401: ",
        ),
    ] {
        let fake = FakeSearch::start(api, "the-right-key").await;
        let (llm, app, client, _data) = start(|c| {
            c.web_tools.search_provider = Some(provider);
            c.web_tools.search_url = Some(fake.url().parse().unwrap());
            c.web_tools.search_api_key = Some(Secret::new(KEY));
        })
        .await;
        let told = search(&llm, &client, "web:refused", "ferry").await;
        assert!(told.starts_with(want), "{told}");
        assert!(told.contains("invalid"), "the provider's reason: {told}");
        assert!(!told.contains(KEY), "{told}");
        assert_eq!(fake.asked().len(), 1);
        app.shutdown().await;
    }
    let fake = FakeSearch::start(Api::Searxng, "").await;
    fake.switch_json_off();
    let (llm, app, client, _data) = start(|c| {
        c.web_tools.search_provider = Some(SearchProvider::Searxng);
        c.web_tools.search_url = Some(fake.url().parse().unwrap());
    })
    .await;
    let told = search(&llm, &client, "web:refused", "ferry").await;
    assert!(
        told.starts_with("error: SearXNG refused the search: HTTP 403"),
        "{told}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn without_a_provider_or_when_turned_off_web_search_is_not_offered() {
    let (llm, app, client, _data) = start(|_| {}).await;
    client.chat("web:none", "hello").await;
    assert!(!llm.last_request().tools().iter().any(|t| t == "web_search"));
    app.shutdown().await;
    let fake = FakeSearch::start(Api::Searxng, "").await;
    let (llm, app, client, _data) = start(|c| {
        c.web_tools.search_provider = Some(SearchProvider::Searxng);
        c.web_tools.search_url = Some(fake.url().parse().unwrap());
        c.tools.web_search = false;
    })
    .await;
    client.chat("web:off", "hello").await;
    assert!(!llm.last_request().tools().iter().any(|t| t == "web_search"));
    app.shutdown().await;
}
