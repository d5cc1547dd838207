//! A small web site for the `web_fetch` tests: an article page with navigation and a footer
//! around its `<main>`, a PDF, an image, a redirect to wherever the test says, and a 50 MiB
//! page streamed chunk by chunk that counts the bytes it produced, so a test can tell a body
//! cut at the cap from one read whole.
//!
//! Must not: build a big body in memory (the 50 MiB page is made as it is read).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;

/// Bytes of the big page.
pub const HUGE: u64 = 50 * 1024 * 1024;
const CHUNK: usize = 64 * 1024;

/// The article page's main text, as the model should read it.
pub const ARTICLE_TEXT: &str = "The harbour ferry leaves at 07:45 from pier 3";

#[derive(Clone, Default)]
struct Site {
    huge_produced: Arc<AtomicU64>,
    pdf: Arc<Vec<u8>>,
}

/// The running site; stops when dropped.
pub struct FakeWeb {
    addr: SocketAddr,
    site: Site,
    task: tokio::task::JoinHandle<()>,
}

impl FakeWeb {
    /// Serves `pdf` at `/timetable.pdf`.
    pub async fn start(pdf: Vec<u8>) -> FakeWeb {
        let site = Site {
            pdf: Arc::new(pdf),
            ..Site::default()
        };
        let app = Router::new()
            .route("/article", get(article))
            .route("/timetable.pdf", get(pdf_file))
            .route("/logo.png", get(png))
            .route("/huge", get(huge))
            .route("/go", get(redirect))
            .with_state(site.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeWeb { addr, site, task }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `127.0.0.1:<port>`, as `web_tools.allow_private` lists it.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// Bytes of `/huge` produced so far (sent, or in the server's buffers).
    pub fn huge_produced(&self) -> u64 {
        self.site.huge_produced.load(Ordering::SeqCst)
    }
}

impl Drop for FakeWeb {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn article() -> Response {
    let page = format!(
        "<!doctype html><html><head><title>Ferry times</title>\
         <script>document.title='stolen'</script></head><body>\
         <nav><a href=\"/\">Home</a> <a href=\"/contact\">Contact us</a></nav>\
         <main><h1>Ferry times</h1><p>{ARTICLE_TEXT}, see \
         <a href=\"https://ferry.example/winter\">the winter timetable</a>.</p>\
         <ul><li>Monday to Friday</li><li>Not on holidays</li></ul></main>\
         <footer>Cookie settings</footer></body></html>"
    );
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response()
}

async fn pdf_file(State(site): State<Site>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/pdf")],
        site.pdf.as_ref().clone(),
    )
        .into_response()
}

async fn png() -> Response {
    let png: &[u8] = &[
        0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, b'I',
    ];
    ([(header::CONTENT_TYPE, "image/png")], png.to_vec()).into_response()
}

/// 50 MiB of HTML made chunk by chunk as the client reads, without a `Content-Length`.
async fn huge(State(site): State<Site>) -> Response {
    let produced = site.huge_produced.clone();
    let head = "<html><body><main><p>start of the long page</p><p>";
    let chunks = (0..HUGE as usize / CHUNK).map(move |i| {
        let mut chunk = vec![b'a'; CHUNK];
        if i == 0 {
            chunk[..head.len()].copy_from_slice(head.as_bytes());
        }
        produced.fetch_add(CHUNK as u64, Ordering::SeqCst);
        Ok::<_, std::io::Error>(Bytes::from(chunk))
    });
    let body = Body::from_stream(futures::stream::iter(chunks));
    ([(header::CONTENT_TYPE, "text/html")], body).into_response()
}

#[derive(Deserialize)]
struct To {
    to: String,
}

async fn redirect(Query(to): Query<To>) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, to.to)]).into_response()
}
