//! An image sent through the API as a `data:` URL content part reaches a model that sees as
//! an image part of the person's message, the way a photo from a chat does.

use herald_test_support::db::Db;
use herald_test_support::fake_llm::Step;

use super::Api;

/// A 1×1 PNG.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inline_image_reaches_a_model_that_sees() {
    let Some(api) = Api::start(Db::Sqlite, |c| c.llm.vision = true).await else {
        return;
    };
    api.llm.push(Step::Reply("A single dot.".into()));
    let out = api
        .run(&format!(
            "r = client.chat.completions.create(model='herald', messages=[{{'role': 'user', \
             'content': [{{'type': 'text', 'text': 'What is in this picture?'}}, \
             {{'type': 'image_url', 'image_url': {{'url': 'data:image/png;base64,{PNG_B64}'}}}}]}}])\n\
             out(text=r.choices[0].message.content)"
        ))
        .await;
    assert_eq!(out[0]["text"], "A single dot.");
    let req = api.llm.last_request();
    let images = req.images();
    assert_eq!(images.len(), 1, "one image part: {images:?}");
    assert_eq!(images[0].1, format!("data:image/png;base64,{PNG_B64}"));
    assert!(req.last_user().contains("What is in this picture?"));
    api.app.shutdown().await;
}
