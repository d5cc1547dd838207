//! `herald doctor`: checks what an operator would otherwise find out from a silent bot — the
//! config, the store and its migrations, the model endpoint, each adapter's credentials — and
//! prints one ✓/✗ line per check with what to do about a failure.
//!
//! It must not change anything (no migrations, no database file created, no webhook set) and
//! must never print a secret: errors from HTTP clients carry URLs, and a Telegram URL holds the
//! bot token, so every message is built without the URL and scrubbed of the secrets.

use std::time::Duration;

use serde_json::Value;

use crate::config::{self, Config, LoadOptions, Secret, Transport};
use crate::store;

const TIMEOUT: Duration = Duration::from_secs(5);

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    Ok(String),
    /// Not broken, but worth knowing (e.g. no model configured).
    Warn(String),
    Fail(String),
}

/// The report: (check name, outcome) in the order run.
#[derive(Debug, Default)]
pub struct Report(pub Vec<(&'static str, Check)>);

impl Report {
    pub fn failed(&self) -> bool {
        self.0.iter().any(|(_, c)| matches!(c, Check::Fail(_)))
    }

    /// The configuration itself was refused (the exit status is then 2, as for `serve`).
    pub fn config_failed(&self) -> bool {
        self.0
            .iter()
            .any(|(name, c)| *name == "config" && matches!(c, Check::Fail(_)))
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, c) in &self.0 {
            let (mark, text) = match c {
                Check::Ok(t) => ("✓", t),
                Check::Warn(t) => ("!", t),
                Check::Fail(t) => ("✗", t),
            };
            out.push_str(&format!("{mark} {name}: {text}\n"));
        }
        let fails = self
            .0
            .iter()
            .filter(|(_, c)| matches!(c, Check::Fail(_)))
            .count();
        out.push_str(&match fails {
            0 => "all checks passed\n".to_string(),
            1 => "1 check failed\n".to_string(),
            n => format!("{n} checks failed\n"),
        });
        out
    }
}

/// Runs every check. A config that does not load stops the report there: the other checks
/// would only test defaults the operator did not mean.
pub async fn run(opts: &LoadOptions) -> Report {
    let mut report = Report::default();
    let config = match config::load(opts) {
        Ok(c) => {
            let from = match &opts.file {
                Some(f) => format!("loaded from {}", f.display()),
                None => "no file; defaults and environment".to_string(),
            };
            report.0.push(("config", Check::Ok(from)));
            report
                .0
                .push(("model keys", super::doctor_config::model_sources(opts, &c)));
            report.0.extend(super::doctor_config::access(&c));
            report.0.extend(super::doctor_config::budget_prices(&c));
            report.0.extend(super::doctor_routing::routing(&c));
            c
        }
        Err(e) => {
            report.0.push(("config", Check::Fail(e.to_string())));
            return report;
        }
    };
    report
        .0
        .push(("data dir", check_data_dir(&config.server.data_dir)));
    check_store(&config, &mut report).await;
    report.0.extend(super::doctor_files::prompt_files(&config));
    report
        .0
        .extend(super::doctor_files::mcp_servers(&config).await);
    let http = match reqwest::Client::builder().timeout(TIMEOUT).build() {
        Ok(h) => h,
        Err(e) => {
            report.0.push(("http client", Check::Fail(describe(e))));
            return report;
        }
    };
    let secrets = secrets(&config);
    let scrub = |s: String| {
        secrets
            .iter()
            .fold(s, |s, secret| s.replace(secret.as_str(), "***"))
    };
    report
        .0
        .push(("model", scrubbed(check_model(&config, &http).await, &scrub)));
    if let Some(token) = &config.telegram.token {
        let c = check_telegram(&http, config.telegram.api_url.as_str(), token).await;
        report.0.push(("telegram", scrubbed(c, &scrub)));
    }
    if let Some(token) = &config.discord.token {
        let c = check_discord(&http, config.discord.api_url.as_str(), token).await;
        report.0.push(("discord", scrubbed(c, &scrub)));
    }
    slack(&config, &mut report).await;
    matrix(&config, &mut report).await;
    for (label, result) in crate::adapters::email::doctor(&config).await {
        report
            .0
            .push((label, result.map_or_else(Check::Fail, Check::Ok)));
    }
    signal(&config, &mut report).await;
    whatsapp(&config, &mut report).await;
    report
}

/// The Signal section's checks (`adapters::signal::doctor`), when the section asks for it.
async fn signal(config: &Config, report: &mut Report) {
    use crate::adapters::signal::{config::SignalConfig, doctor};
    match config.section::<SignalConfig>("signal") {
        Ok(Some(section)) if section.wanted() => {
            for (label, result) in doctor(&section).await {
                let check = match result {
                    Ok(found) => Check::Ok(found),
                    Err(why) => Check::Fail(why),
                };
                report.0.push((label, check));
            }
        }
        Ok(_) => {}
        Err(e) => report.0.push(("signal", Check::Fail(e.to_string()))),
    }
}

/// The Slack section's checks (`adapters::slack::doctor`), when a bot token is set.
async fn slack(config: &Config, report: &mut Report) {
    use crate::adapters::slack::{config::SlackConfig, doctor};
    match config.section::<SlackConfig>("slack") {
        Ok(Some(section)) if section.bot_token.is_some() => {
            for (label, result) in doctor(&section).await {
                report.0.push((
                    label,
                    match result {
                        Ok(found) => Check::Ok(found),
                        Err(why) => Check::Fail(why),
                    },
                ));
            }
        }
        Ok(_) => {}
        Err(e) => report.0.push(("slack", Check::Fail(e.to_string()))),
    }
}

/// The Matrix section's checks (`adapters::matrix::doctor`: login and one sync), when a user
/// id is set.
async fn matrix(config: &Config, report: &mut Report) {
    use crate::adapters::matrix::{config::MatrixConfig, doctor};
    match config.section::<MatrixConfig>("matrix") {
        Ok(Some(section)) if section.user_id.is_some() => {
            for (label, result) in doctor(&section, &config.server.data_dir).await {
                let check = match result {
                    Ok(found) => Check::Ok(found),
                    Err(why) => Check::Fail(why),
                };
                report.0.push((label, check));
            }
        }
        Ok(_) => {}
        Err(e) => report.0.push(("matrix", Check::Fail(e.to_string()))),
    }
}

/// The WhatsApp section's checks (`adapters::whatsapp::doctor`), when an access token is set.
async fn whatsapp(config: &Config, report: &mut Report) {
    use crate::adapters::whatsapp::{config::WhatsAppConfig, doctor};
    match config.section::<WhatsAppConfig>("whatsapp") {
        Ok(Some(section)) if section.access_token.is_some() => {
            for (label, result) in doctor(&section).await {
                report.0.push((
                    label,
                    match result {
                        Ok(found) => Check::Ok(found),
                        Err(why) => Check::Fail(why),
                    },
                ));
            }
        }
        Ok(_) => {}
        Err(e) => report.0.push(("whatsapp", Check::Fail(e.to_string()))),
    }
}

fn secrets(c: &Config) -> Vec<String> {
    [
        c.llm.api_key.as_ref(),
        c.telegram.token.as_ref(),
        c.discord.token.as_ref(),
        c.web.token.as_ref(),
        c.store.url.as_ref(),
    ]
    .into_iter()
    .flatten()
    .chain(c.llm.fallbacks.iter().filter_map(|f| f.api_key.as_ref()))
    .map(|s| s.expose().to_string())
    .filter(|s| !s.is_empty())
    .collect()
}

fn scrubbed(c: Check, scrub: &impl Fn(String) -> String) -> Check {
    match c {
        Check::Ok(t) => Check::Ok(scrub(t)),
        Check::Warn(t) => Check::Warn(scrub(t)),
        Check::Fail(t) => Check::Fail(scrub(t)),
    }
}

/// `server.data_dir` holds the SQLite database, media and memory files: it must be a folder
/// Herald can write to, or one `serve` can create. Nothing is left behind by the check.
fn check_data_dir(dir: &std::path::Path) -> Check {
    match store::data_dir::check(dir) {
        Ok(store::data_dir::DirState::Writable) => {
            Check::Ok(format!("{} is writable", dir.display()))
        }
        Ok(store::data_dir::DirState::Creatable { ancestor }) => Check::Ok(format!(
            "{} does not exist yet; `herald serve` creates it (in {}, which is writable)",
            dir.display(),
            ancestor.display()
        )),
        Err(problem) => Check::Fail(problem),
    }
}

async fn check_store(config: &Config, report: &mut Report) {
    let url = config.store_url();
    let shown = crate::config::redact_url(&url);
    if let Some(path) = sqlite_path(&url) {
        if !std::path::Path::new(&path).exists() {
            // A fresh install before its first start: nothing is wrong yet.
            report.0.push((
                "store",
                Check::Warn(format!(
                    "no database yet at {path}; `herald serve` (or `herald migrate`) creates it. \
                     If the daemon already ran, check server.data_dir"
                )),
            ));
            return;
        }
    }
    let store = match tokio::time::timeout(TIMEOUT, store::connect_read_only(&url)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            report
                .0
                .push(("store", Check::Fail(format!("{shown}: {e}"))));
            return;
        }
        Err(_) => {
            report.0.push((
                "store",
                Check::Fail(format!("{shown}: no answer within {}s", TIMEOUT.as_secs())),
            ));
            return;
        }
    };
    report.0.push((
        "store",
        Check::Ok(format!("{} reachable ({shown})", store.backend())),
    ));
    // The same verdict `serve` reaches: a migration this binary does not know is a refusal,
    // whatever else is applied.
    let migrations = match (store.migrations_unknown().await, store.ready().await) {
        (Ok(unknown), _) if !unknown.is_empty() => {
            Check::Fail(store::unknown_migrations_message(&unknown))
        }
        (Ok(_), Ok(true)) => Check::Ok("all applied".into()),
        (Ok(_), Ok(false)) => Check::Fail("not all applied: run `herald migrate`".into()),
        (Err(e), _) | (_, Err(e)) => Check::Fail(format!("cannot read the migration table: {e}")),
    };
    report.0.push(("migrations", migrations));
    store.close().await;
}

pub(crate) fn sqlite_path(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or_default();
    (!path.is_empty() && path != ":memory:").then(|| path.to_string())
}

/// `GET {base_url}/models` with the key, as every OpenAI-compatible server offers (Anthropic:
/// `GET {base_url}/v1/models` with `x-api-key`).
async fn check_model(config: &Config, http: &reqwest::Client) -> Check {
    let anthropic = match config.transport() {
        Transport::Echo => {
            return Check::Warn("echo provider (demo only: replies repeat the user)".into())
        }
        Transport::None => return Check::Warn(
            "no model configured: chats get setup instructions (set llm.base_url and llm.model)"
                .into(),
        ),
        Transport::OpenAi => false,
        Transport::Anthropic => true,
    };
    let base = config
        .llm
        .base_url
        .as_ref()
        .map_or("", |u| u.as_str())
        .trim_end_matches('/');
    let model = config.llm.model.as_deref().unwrap_or_default();
    let mut req = if anthropic {
        let root = base.strip_suffix("/v1").unwrap_or(base);
        http.get(format!("{root}/v1/models"))
            .header("anthropic-version", crate::llm::ANTHROPIC_VERSION)
    } else {
        http.get(format!("{base}/models"))
    };
    if let Some(key) = &config.llm.api_key {
        req = if anthropic {
            req.header("x-api-key", key.expose())
        } else {
            req.bearer_auth(key.expose())
        };
    }
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) => return Check::Fail(format!("{base} unreachable: {}", describe(e))),
    };
    let status = resp.status();
    if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        return Check::Fail(format!(
            "{base} refused the key (HTTP {status}): check llm.api_key"
        ));
    }
    if !status.is_success() {
        return Check::Fail(format!("{base}/models answered HTTP {status}"));
    }
    let listed = resp
        .json::<Value>()
        .await
        .ok()
        .and_then(|v| v["data"].as_array().cloned())
        .map(|d| d.iter().any(|m| m["id"] == model));
    match listed {
        Some(true) => Check::Ok(format!("{base} answers and lists {model}")),
        Some(false) => Check::Warn(format!(
            "{base} answers but does not list {model:?}: check llm.model"
        )),
        None => Check::Ok(format!(
            "{base} answers (no model list to check {model} against)"
        )),
    }
}

async fn check_telegram(http: &reqwest::Client, api_url: &str, token: &Secret) -> Check {
    let api = api_url.trim_end_matches('/');
    let url = format!("{api}/bot{}/getMe", token.expose());
    let resp = match http.get(url).send().await {
        Ok(r) => r,
        Err(e) => return Check::Fail(format!("{api} unreachable: {}", describe(e))),
    };
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    if body["ok"] == true {
        let name = body["result"]["username"].as_str().unwrap_or("?");
        return Check::Ok(format!("token accepted: bot @{name}"));
    }
    let why = body["description"].as_str().unwrap_or("no description");
    Check::Fail(format!(
        "getMe failed (HTTP {status}: {why}): check telegram.token"
    ))
}

async fn check_discord(http: &reqwest::Client, api_url: &str, token: &Secret) -> Check {
    let api = api_url.trim_end_matches('/');
    let resp = match http
        .get(format!("{api}/api/v10/users/@me"))
        .header("Authorization", format!("Bot {}", token.expose()))
        .send()
        .await
    {
        Ok(r) => r,
        Err(e) => return Check::Fail(format!("{api} unreachable: {}", describe(e))),
    };
    let status = resp.status();
    if !status.is_success() {
        return Check::Fail(format!(
            "users/@me answered HTTP {status}: check discord.token"
        ));
    }
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    let name = body["username"].as_str().unwrap_or("?");
    Check::Ok(format!("token accepted: bot {name}"))
}

/// A transport error with its causes ("connection refused", "dns error") and without its URL,
/// which for Telegram holds the token.
fn describe(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
