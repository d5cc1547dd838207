//! Files through the fake: the bot's upload flow (URL, bytes, completion) and a person's file
//! served only to the bot token.

use serde_json::json;

use super::{call, call_form, start};

#[tokio::test]
async fn the_upload_flow_shares_the_bytes_in_the_channel_and_thread() {
    let fake = start().await;
    let bot = fake.config().bot_token.clone();
    fake.add_channel("C0GENERAL", "general");
    let parent = fake.mention("C0GENERAL", "U0ERIN", "send me the report");
    let bytes = b"%PDF-1.4 not really a pdf".to_vec();

    // The method reads forms only: the same arguments as JSON are not seen.
    let as_json = call(
        &fake,
        "files.getUploadURLExternal",
        Some(&bot),
        json!({"filename": "report.pdf", "length": bytes.len()}),
    )
    .await;
    assert_eq!(as_json.body["error"], "invalid_arguments");
    let length = bytes.len().to_string();
    let slot = call_form(
        &fake,
        "files.getUploadURLExternal",
        &[
            ("token", &bot),
            ("filename", "report.pdf"),
            ("length", &length),
        ],
    )
    .await;
    assert_eq!(slot.body["ok"], true, "{}", slot.body);
    let file_id = slot.body["file_id"].as_str().unwrap().to_string();
    let upload_url = slot.body["upload_url"].as_str().unwrap().to_string();
    assert!(file_id.starts_with('F'));

    let early = json!({"files": [{"id": file_id}], "channel_id": "C0GENERAL"});
    let not_yet = call(&fake, "files.completeUploadExternal", Some(&bot), early).await;
    assert_eq!(not_yet.body["error"], "file_not_found");

    let sent = reqwest::Client::new()
        .post(&upload_url)
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200);
    assert_eq!(sent.text().await.unwrap(), format!("OK - {}", bytes.len()));

    // `files` as a JSON string, as a form carries it.
    let files = json!([{"id": file_id, "title": "Q3 report"}]).to_string();
    let done = call_form(
        &fake,
        "files.completeUploadExternal",
        &[
            ("token", &bot),
            ("files", &files),
            ("channel_id", "C0GENERAL"),
            ("thread_ts", &parent),
            ("initial_comment", "here it is"),
        ],
    )
    .await;
    assert_eq!(done.body["ok"], true, "{}", done.body);
    assert_eq!(done.body["files"][0]["id"], file_id.as_str());
    assert_eq!(done.body["files"][0]["mimetype"], "application/pdf");

    let uploads = fake.uploads();
    assert_eq!(uploads.len(), 1);
    let u = &uploads[0];
    assert_eq!(u.bytes, bytes);
    assert_eq!(u.filename, "report.pdf");
    assert_eq!(u.title.as_deref(), Some("Q3 report"));
    assert_eq!(u.channel.as_deref(), Some("C0GENERAL"));
    assert_eq!(u.thread_ts.as_deref(), Some(parent.as_str()));
    assert_eq!(u.initial_comment.as_deref(), Some("here it is"));

    let thread = json!({"channel": "C0GENERAL", "ts": parent});
    let replies = call(&fake, "conversations.replies", Some(&bot), thread).await;
    let shared = &replies.body["messages"][1];
    assert_eq!(shared["files"][0]["id"], file_id.as_str());
    assert_eq!(shared["text"], "here it is");

    // `files` as a JSON array in a JSON body, shared nowhere (a private file).
    let slot = call_form(
        &fake,
        "files.getUploadURLExternal",
        &[("token", &bot), ("filename", "notes.txt"), ("length", "5")],
    )
    .await;
    let second = slot.body["file_id"].as_str().unwrap().to_string();
    let url = slot.body["upload_url"].as_str().unwrap();
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(b"notes".to_vec()).file_name("notes.txt"),
    );
    let sent = reqwest::Client::new()
        .post(url)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200);
    let args = json!({"files": [{"id": second}]});
    let done = call(&fake, "files.completeUploadExternal", Some(&bot), args).await;
    assert_eq!(done.body["ok"], true, "{}", done.body);
    let u = &fake.uploads()[1];
    assert_eq!(
        (u.bytes.as_slice(), u.channel.as_deref()),
        (&b"notes"[..], None)
    );

    // The served copy is the uploaded bytes.
    let url = shared["files"][0]["url_private"].as_str().unwrap();
    let got = reqwest::Client::new()
        .get(url)
        .bearer_auth(&bot)
        .send()
        .await
        .unwrap();
    assert_eq!(got.bytes().await.unwrap().to_vec(), bytes);
}

#[tokio::test]
async fn a_persons_file_is_served_only_to_the_bot_token() {
    let fake = start().await;
    let bot = fake.config().bot_token.clone();
    let channel = fake.dm_channel("U0FRAN");
    let png = b"\x89PNG\r\n\x1a\nfake image bytes".to_vec();
    let shared = fake.file_message(&channel, "U0FRAN", "look", "cat.png", "image/png", &png);
    assert!(shared.url_private.contains(&format!(
        "/files-pri/{}-{}/",
        fake.config().team_id,
        shared.file_id
    )));

    let http = reqwest::Client::new();
    let anonymous = http.get(&shared.url_private).send().await.unwrap();
    assert_eq!(
        anonymous.status(),
        200,
        "Slack answers a sign-in page, not a 401"
    );
    let ctype = anonymous.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(ctype.starts_with("text/html"), "{ctype}");
    assert_ne!(anonymous.bytes().await.unwrap().to_vec(), png);

    let wrong = http
        .get(&shared.url_private)
        .bearer_auth("xoxb-other")
        .send()
        .await
        .unwrap();
    assert!(wrong.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));

    let ok = http
        .get(&shared.url_private)
        .bearer_auth(&bot)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.headers()["content-type"], "image/png");
    assert_eq!(ok.bytes().await.unwrap().to_vec(), png);

    let fetches = fake.file_fetches();
    let seen: Vec<bool> = fetches.iter().map(|f| f.authorized).collect();
    assert_eq!(seen, [false, false, true]);

    // The message that carried it.
    let args = json!({"channel": channel, "include_all_metadata": false});
    let history = call(&fake, "conversations.history", Some(&bot), args).await;
    let msg = &history.body["messages"][0];
    assert_eq!(msg["ts"], shared.ts.as_str());
    assert_eq!(msg["subtype"], "file_share");
    assert_eq!(msg["files"][0]["size"], png.len());
    assert_eq!(msg["files"][0]["url_private"], shared.url_private.as_str());
}
