//! The doctor's reading of a configuration that loaded: where each model key came from and
//! whether anyone can talk to the bot. Both are mistakes that pass validation and show only as
//! a silent or wrong bot — a copied example file that beats `OPENAI_*`, an empty allowlist.
//!
//! Must not print a secret (the API key is shown as `***`) or touch the network.

use figment::providers::{Format, Toml};
use figment::Figment;

use super::doctor::Check;
use crate::config::{Config, LoadOptions, Transport};

/// Where one `[llm]` key got its value, in the loader's precedence: `HERALD_LLM__<KEY>`, then
/// the file, then the conventional `OPENAI_<KEY>`, then the default.
fn source(opts: &LoadOptions, key: &str, conventional: Option<&str>, set: bool) -> String {
    let env = |name: &str| opts.use_env && std::env::var_os(name).is_some();
    let herald = format!("HERALD_LLM__{}", key.to_uppercase());
    if env(&herald) {
        return herald;
    }
    if let Some(file) = &opts.file {
        let in_file = Figment::from(Toml::file_exact(file))
            .find_value(&format!("llm.{key}"))
            .is_ok();
        if in_file {
            return file.display().to_string();
        }
    }
    if let Some(name) = conventional {
        let nonempty = opts.use_env && std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
        if nonempty && set {
            return name.to_string();
        }
    }
    "default".to_string()
}

/// One line: each model key's value (the key masked) and its source: the provider (and its
/// transport), and the variable or file the key came from, never the key.
pub fn model_sources(opts: &LoadOptions, config: &Config) -> Check {
    let llm = &config.llm;
    let provider = format!("{:?}", llm.provider).to_lowercase();
    let effective = format!("{:?}", config.provider_kind()).to_lowercase();
    let shown = |v: Option<&str>| v.map_or("unset".to_string(), str::to_string);
    let preset = config.provider_kind().preset();
    let (base_env, model_env) = match preset {
        Some(p) => (
            p.base_url_env,
            p.model_env
                .or((p.transport == Transport::OpenAi).then_some("OPENAI_MODEL")),
        ),
        None => (Some("OPENAI_BASE_URL"), Some("OPENAI_MODEL")),
    };
    let mut base_source = source(opts, "base_url", base_env, llm.base_url.is_some());
    if base_source == "default" && llm.base_url.is_some() {
        if let Some(p) = preset {
            base_source = format!("the {} preset", p.name);
        }
    }
    let key_source = match llm.api_key_from {
        Some(var) => var.to_string(),
        None => source(opts, "api_key", None, llm.api_key.is_some()),
    };
    let parts = [
        format!(
            "provider {provider}{} ({}), {} transport",
            if provider == effective {
                String::new()
            } else {
                format!(" → {effective}")
            },
            source(opts, "provider", None, true),
            config.transport().label(),
        ),
        format!(
            "base_url {} ({base_source})",
            shown(llm.base_url.as_ref().map(|u| u.as_str())),
        ),
        format!(
            "model {} ({})",
            shown(llm.model.as_deref()),
            source(opts, "model", model_env, llm.model.is_some())
        ),
        format!(
            "api_key {} ({key_source})",
            if llm.api_key.is_some() {
                "***"
            } else {
                "unset"
            },
        ),
    ];
    Check::Ok(parts.join("; "))
}

/// A `!` line per chat platform nobody can reach: deny by default means an adapter with an
/// empty allowlist answers only senders approved through pairing.
pub fn access(config: &Config) -> Vec<(&'static str, Check)> {
    let pairing = if config.pairing.enabled {
        "only senders you approve with `herald pairing approve` can talk to the bot"
    } else {
        "nobody can talk to the bot (pairing is off too)"
    };
    let mut out = Vec::new();
    let tg = &config.telegram;
    if tg.token.is_some() && !tg.allow_all_users && tg.allowed_users.is_empty() {
        out.push((
            "telegram access",
            Check::Warn(format!(
                "telegram.allowed_users is empty: {pairing}; add your user id to it"
            )),
        ));
    }
    let dc = &config.discord;
    if dc.token.is_some()
        && !dc.allow_all_users
        && dc.allowed_users.is_empty()
        && dc.allowed_roles.is_empty()
    {
        out.push((
            "discord access",
            Check::Warn(format!(
                "discord.allowed_users and discord.allowed_roles are empty: {pairing}; add your \
                 user id to discord.allowed_users"
            )),
        ));
    }
    out
}

/// With a spending cap on, a configured model without a price has every call refused: each
/// one (main, fallbacks, handoff writer) is named with the fix.
pub fn budget_prices(config: &Config) -> Option<(&'static str, Check)> {
    if !config.budget.has_caps() {
        return None;
    }
    let prices = crate::budget::PriceTable::new(&config.budget.prices);
    let mut models: Vec<&str> = config.llm.model.as_deref().into_iter().collect();
    models.extend(config.llm.fallbacks.iter().map(|f| f.model.as_str()));
    models.extend(config.handoff.writer.iter().map(|w| w.model.as_str()));
    let mut missing: Vec<&str> = models.into_iter().filter(|m| !prices.priced(m)).collect();
    missing.dedup();
    let check = if missing.is_empty() {
        Check::Ok("every configured model has a price".into())
    } else {
        Check::Fail(format!(
            "spending caps are on and {} no price, so every call to it is refused; add a \
             [[budget.prices]] entry (model, input, output per million tokens) for each",
            missing
                .iter()
                .map(|m| format!("{m:?}"))
                .collect::<Vec<_>>()
                .join(", ")
                + if missing.len() == 1 { " has" } else { " have" }
        ))
    };
    Some(("budget prices", check))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Endpoint, PriceConfig};

    #[test]
    fn with_caps_on_every_unpriced_model_is_named() {
        let mut c = Config::default();
        c.llm.model = Some("gpt-4o".into());
        c.llm.fallbacks = vec![Endpoint {
            model: "local-llama".into(),
            ..Endpoint::default()
        }];
        c.handoff.writer = vec![Endpoint {
            model: "gpt-4o-mini".into(),
            ..Endpoint::default()
        }];
        c.budget.prices = vec![PriceConfig {
            model: "gpt-4o*".into(),
            input: Some(2.5),
            output: Some(10.0),
            cache_read: None,
            cache_write: None,
        }];
        assert_eq!(budget_prices(&c), None, "no caps, no check");
        c.budget.daily = Some(5.0);
        let Some(("budget prices", Check::Fail(text))) = budget_prices(&c) else {
            panic!("a failing check")
        };
        assert!(text.contains("\"local-llama\" has no price"), "{text}");
        assert!(!text.contains("gpt-4o"), "{text}");
        c.budget.prices[0].model = "*".into();
        assert!(matches!(budget_prices(&c), Some((_, Check::Ok(_)))));
    }
}
