//! The `web_fetch` tool end to end: the fake model calls it in a web-chat turn and the test
//! reads what the model was told. A local site (`fake_web`) on 127.0.0.1 is listed in
//! `web_tools.allow_private`, as an operator would list an intranet wiki; everything else on
//! an internal address — another port of 127.0.0.1, the cloud metadata address, `localhost`
//! (a name resolving to a loopback address), a redirect from the allowed site to localhost — is
//! refused with the rule's words, and the place named receives nothing. A 50 MiB page is read
//! only up to `web_tools.max_bytes` and said to be cut.

use std::time::Duration;

use herald::app::App;
use herald::config::Config;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::fake_web::{FakeWeb, ARTICLE_TEXT, HUGE};
use herald_test_support::harness::{init, test_config, Client};
use herald_test_support::pdf::text_pdf;
use herald_test_support::recorder::Recorder;
use serde_json::json;

const LOOPBACK: &str =
    "error: the fetch was refused: its address is a loopback address, which Herald does not reach";
const PDF_TEXT: &str = "Winter timetable valid from the first of November";

struct Rig {
    llm: FakeLlm,
    web: FakeWeb,
    client: Client,
    app: App,
    _data: tempfile::TempDir,
}

async fn start(tune: impl FnOnce(&mut Config)) -> Rig {
    init();
    let llm = FakeLlm::start().await;
    let web = FakeWeb::start(text_pdf(&[PDF_TEXT.to_string()])).await;
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    c.cron.enabled = false;
    c.web_tools.allow_private = vec![web.host()];
    tune(&mut c);
    let app = App::start(c).await.expect("app starts");
    let client = Client::new(&app);
    Rig {
        llm,
        web,
        client,
        app,
        _data: data,
    }
}

impl Rig {
    /// One turn in which the model fetches `url`; what the tool told it.
    async fn fetch(&self, lane: &str, url: &str) -> String {
        let ask = format!("please read {url}");
        self.llm.push_when(
            &ask,
            Step::ToolCall("web_fetch".into(), json!({ "url": url }).to_string()),
        );
        let (status, _) = self.client.chat(lane, &ask).await;
        assert_eq!(status, 200);
        let results = self.llm.tool_results_for(&ask);
        assert_eq!(results.len(), 1, "{results:?}");
        results[0].clone()
    }
}

#[tokio::test]
async fn a_page_is_its_main_content_as_markdown_and_a_pdf_its_text() {
    let rig = start(|_| {}).await;
    assert!(rig.llm.requests().is_empty());
    let page = rig
        .fetch("web:page", &format!("{}/article", rig.web.url()))
        .await;
    assert!(
        page.starts_with("The following is untrusted content from http://127.0.0.1:"),
        "{page}"
    );
    assert!(page.contains("# Ferry times"), "{page}");
    assert!(page.contains(ARTICLE_TEXT), "{page}");
    assert!(
        page.contains("[the winter timetable](https://ferry.example/winter)"),
        "{page}"
    );
    assert!(page.contains("Monday to Friday"), "{page}");
    for gone in ["Contact us", "Cookie settings", "stolen", "<main>"] {
        assert!(!page.contains(gone), "{gone:?} kept: {page}");
    }
    assert!(page.ends_with("</untrusted-web-content>"), "{page}");

    let pdf = rig
        .fetch("web:page", &format!("{}/timetable.pdf", rig.web.url()))
        .await;
    assert!(pdf.contains(PDF_TEXT), "{pdf}");

    let png = rig
        .fetch("web:page", &format!("{}/logo.png", rig.web.url()))
        .await;
    assert_eq!(
        png,
        "error: image/png is not a type web_fetch reads (web pages, PDFs and text documents only)"
    );
    rig.app.shutdown().await;
}

#[tokio::test]
async fn internal_addresses_and_redirects_to_them_are_refused() {
    let rig = start(|_| {}).await;
    let inside = Recorder::start().await;
    let cases = [
        (
            format!("http://127.0.0.1:{}/admin", inside.port()),
            LOOPBACK,
        ),
        (
            "http://169.254.169.254/latest/meta-data/".to_string(),
            "error: the fetch was refused: its address is a cloud metadata address, which Herald does not reach",
        ),
        (
            format!("http://localhost:{}/admin", inside.port()),
            LOOPBACK,
        ),
        (
            format!(
                "{}/go?to=http://localhost:{}/steal",
                rig.web.url(),
                inside.port()
            ),
            LOOPBACK,
        ),
        ("file:///etc/passwd".to_string(), "error: the fetch was refused: file addresses are not fetched"),
    ];
    for (i, (url, want)) in cases.iter().enumerate() {
        let told = rig.fetch(&format!("web:refuse{i}"), url).await;
        assert!(told.starts_with(want), "{url}: {told}");
    }
    assert!(
        inside.seen().is_empty(),
        "the internal server was reached: {:?}",
        inside.seen()
    );
    rig.app.shutdown().await;
}

#[tokio::test]
async fn a_50_mib_page_is_read_up_to_the_cap_only() {
    let rig = start(|c| c.web_tools.max_bytes = 1024 * 1024).await;
    let told = rig
        .fetch("web:huge", &format!("{}/huge", rig.web.url()))
        .await;
    let head: String = told.chars().take(400).collect();
    assert!(told.contains("start of the long page"), "{head}");
    assert!(
        told.ends_with("[cut: the page is longer than 1.0 MB; only its beginning was read]"),
        "{}",
        told.chars().rev().take(300).collect::<String>()
    );
    assert!(
        told.contains("[cut: the text has 1048"),
        "the text over max_chars is cut with a note"
    );
    // The server made what was read plus what sat in buffers, never the whole page.
    let produced = rig.web.huge_produced();
    eprintln!("the 50 MiB page: {produced} bytes produced for a 1 MiB cap");
    assert!(
        produced < HUGE / 4,
        "{produced} of {HUGE} bytes were produced"
    );
    rig.app.shutdown().await;
}

#[tokio::test]
async fn web_fetch_is_not_offered_when_turned_off() {
    let rig = start(|c| c.tools.web_fetch = false).await;
    rig.client.chat("web:off", "hello").await;
    let offered = rig.llm.last_request().tools();
    assert!(!offered.iter().any(|t| t == "web_fetch"), "{offered:?}");
    rig.app.shutdown().await;
    let rig = start(|_| {}).await;
    rig.client.chat("web:on", "hello").await;
    assert!(rig
        .llm
        .last_request()
        .tools()
        .iter()
        .any(|t| t == "web_fetch"));
    tokio::time::timeout(Duration::from_secs(10), rig.app.shutdown())
        .await
        .unwrap();
}
