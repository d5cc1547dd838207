//! The echo floor of the load benchmark (issue #34): the least a Telegram gateway can do per
//! message, with nothing stored. It long-polls `getUpdates`, asks the model once per text
//! message (one chat completion, no history, no prompt) and `sendMessage`s the answer. Herald's
//! CPU, allocations and latency per turn are reported as ratios to this program's, measured in
//! the same run against the same fake Bot API and fake model (`benches/load.rs --matrix`).
//!
//! It uses Herald's HTTP client stack (reqwest on hyper, JSON through serde_json, the tokio
//! multi-threaded runtime) and counts its allocations with Herald's own counting allocator.
//! Each line read on stdin is answered on stdout with `<allocations> <bytes>` so far.
//!
//! Run: `echo_floor <bot api url> <token> <model base url>` (the benchmark starts it).

use std::io::BufRead;

use herald::telemetry::alloc_count::{totals, CountingAlloc};
use serde_json::{json, Value};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        // `cargo test --all-targets` builds examples without running them; nothing to do.
        eprintln!("usage: echo_floor <bot api url> <token> <model base url>");
        return;
    }
    std::thread::spawn(|| {
        for _ in std::io::stdin().lock().lines().map_while(Result::ok) {
            let (calls, bytes) = totals();
            println!("{calls} {bytes}");
        }
    });
    // As in Herald's main: reqwest is built without a TLS provider of its own.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let bot = format!("{}/bot{}", args[1], args[2]);
    let model = format!("{}/chat/completions", args[3]);
    let mut offset = 0i64;
    loop {
        let updates = match get_updates(&http, &bot, offset).await {
            Ok(u) => u,
            Err(e) => {
                eprintln!("echo_floor: getUpdates: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        for update in updates {
            offset = offset.max(update["update_id"].as_i64().unwrap_or(0) + 1);
            let message = &update["message"];
            let (Some(chat), Some(text)) =
                (message["chat"]["id"].as_i64(), message["text"].as_str())
            else {
                continue;
            };
            let (http, bot, model, text) =
                (http.clone(), bot.clone(), model.clone(), text.to_owned());
            tokio::spawn(async move {
                if let Err(e) = answer(&http, &bot, &model, chat, &text).await {
                    eprintln!("echo_floor: chat {chat}: {e}");
                }
            });
        }
    }
}

async fn get_updates(http: &reqwest::Client, bot: &str, offset: i64) -> Result<Vec<Value>, Error> {
    let body = json!({ "offset": offset, "timeout": 25, "limit": 100 });
    let mut reply: Value = http
        .post(format!("{bot}/getUpdates"))
        .json(&body)
        .send()
        .await?
        .json()
        .await?;
    match reply["result"].take() {
        Value::Array(updates) => Ok(updates),
        _ => Err(format!("no result in {reply}").into()),
    }
}

async fn answer(
    http: &reqwest::Client,
    bot: &str,
    model: &str,
    chat: i64,
    text: &str,
) -> Result<(), Error> {
    let request = json!({
        "model": "fake-model",
        "messages": [{ "role": "user", "content": text }],
    });
    let completion: Value = http
        .post(model)
        .json(&request)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let reply = completion["choices"][0]["message"]["content"]
        .as_str()
        .ok_or("no content in the completion")?;
    http.post(format!("{bot}/sendMessage"))
        .json(&json!({ "chat_id": chat, "text": reply }))
        .send()
        .await?
        .error_for_status()?;
    Ok(())
}
