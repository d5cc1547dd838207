//! The `[web_tools]` section: the limits of the built-in `web_fetch` tool (which hosts on
//! internal addresses it may reach, how much it reads and for how long, how much text the
//! model gets) and the search provider behind `web_search`. Whether each tool is offered at
//! all is `[tools] web_fetch` / `web_search`.

use serde::{Deserialize, Serialize};

use super::{ConfigUrl, Secret};

/// Which search API `web_search` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchProvider {
    /// A SearXNG instance: `GET <search_url>/search?format=json` (JSON output enabled there).
    Searxng,
    /// Brave Search API: `GET <search_url>/res/v1/web/search` with `X-Subscription-Token`.
    Brave,
    /// Tavily: `POST <search_url>/search` with the key as a bearer token.
    Tavily,
}

impl SearchProvider {
    pub fn name(self) -> &'static str {
        match self {
            SearchProvider::Searxng => "SearXNG",
            SearchProvider::Brave => "Brave Search",
            SearchProvider::Tavily => "Tavily",
        }
    }

    /// Where the provider's public API lives, when the operator names none.
    pub fn default_url(self) -> Option<&'static str> {
        match self {
            SearchProvider::Searxng => None,
            SearchProvider::Brave => Some("https://api.search.brave.com"),
            SearchProvider::Tavily => Some("https://api.tavily.com"),
        }
    }

    /// Whether a call without a key is refused by the provider.
    pub fn needs_key(self) -> bool {
        !matches!(self, SearchProvider::Searxng)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebToolsConfig {
    /// Hosts (`host` or `host:port`) `web_fetch` may reach although they resolve to a
    /// private, loopback or other internal address. Empty: only the public internet.
    pub allow_private: Vec<String>,
    /// Bytes of one page or file read at most; a bigger body is cut off at this cap.
    pub max_bytes: u64,
    /// One fetch — every redirect and the body — ends after this many seconds.
    pub timeout_secs: u64,
    /// Characters of a page's text the model gets; the rest is cut with a note.
    pub max_chars: usize,
    /// `searxng`, `brave` or `tavily`; unset: no `web_search` tool.
    pub search_provider: Option<SearchProvider>,
    /// The search API's base URL (required for SearXNG; Brave and Tavily default to theirs).
    pub search_url: Option<ConfigUrl>,
    /// The search API's key (Brave, Tavily).
    pub search_api_key: Option<Secret>,
    /// Results a search returns when the model asks for no number (at most 10).
    pub search_count: usize,
}

impl Default for WebToolsConfig {
    fn default() -> Self {
        WebToolsConfig {
            allow_private: Vec::new(),
            max_bytes: 2 * 1024 * 1024,
            timeout_secs: 20,
            max_chars: 20_000,
            search_provider: None,
            search_url: None,
            search_api_key: None,
            search_count: 5,
        }
    }
}

impl WebToolsConfig {
    /// The search API's base URL: the configured one, else the provider's public one.
    pub fn search_base(&self) -> Option<String> {
        let provider = self.search_provider?;
        match &self.search_url {
            Some(u) => Some(u.as_str().trim_end_matches('/').to_string()),
            None => provider.default_url().map(str::to_string),
        }
    }

    /// The rules a loaded section must satisfy, each error naming its key.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if let Some(bad) = self
            .allow_private
            .iter()
            .find(|h| crate::net::HostRule::parse(h).is_none())
        {
            return Err((
                "web_tools.allow_private",
                format!("{bad:?} is not a host or host:port (like wiki.internal or 10.0.0.5:8080)"),
            ));
        }
        if self.max_bytes == 0 {
            return Err(("web_tools.max_bytes", "must be more than 0".into()));
        }
        if self.timeout_secs == 0 {
            return Err(("web_tools.timeout_secs", "must be more than 0".into()));
        }
        if self.max_chars < 100 {
            return Err(("web_tools.max_chars", "must be at least 100".into()));
        }
        if !(1..=10).contains(&self.search_count) {
            return Err(("web_tools.search_count", "must be between 1 and 10".into()));
        }
        if let Some(url) = &self.search_url {
            if !matches!(url.url().scheme(), "http" | "https") {
                return Err(("web_tools.search_url", "must be an http(s) URL".into()));
            }
        }
        let Some(provider) = self.search_provider else {
            return Ok(());
        };
        if self.search_base().is_none() {
            return Err((
                "web_tools.search_url",
                format!("{} needs the instance's URL", provider.name()),
            ));
        }
        if provider.needs_key() && self.search_api_key.is_none() {
            return Err((
                "web_tools.search_api_key",
                format!("{} needs an API key", provider.name()),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Tweak<'a> = &'a dyn Fn(&mut WebToolsConfig);

    #[test]
    fn each_rule_names_its_key() {
        let check = |f: Tweak| {
            let mut c = WebToolsConfig::default();
            f(&mut c);
            c.check().err().map(|(key, _)| key)
        };
        assert_eq!(check(&|_| {}), None);
        let cases: &[(&str, Tweak)] = &[
            ("web_tools.allow_private", &|c| {
                c.allow_private = vec!["http://x/".into()]
            }),
            ("web_tools.max_bytes", &|c| c.max_bytes = 0),
            ("web_tools.timeout_secs", &|c| c.timeout_secs = 0),
            ("web_tools.max_chars", &|c| c.max_chars = 10),
            ("web_tools.search_count", &|c| c.search_count = 11),
            ("web_tools.search_url", &|c| {
                c.search_provider = Some(SearchProvider::Searxng)
            }),
            ("web_tools.search_api_key", &|c| {
                c.search_provider = Some(SearchProvider::Brave)
            }),
        ];
        for (key, f) in cases {
            assert_eq!(check(*f), Some(*key));
        }
        let mut brave = WebToolsConfig {
            search_provider: Some(SearchProvider::Brave),
            search_api_key: Some(Secret::new("k")),
            ..WebToolsConfig::default()
        };
        assert_eq!(brave.check(), Ok(()));
        assert_eq!(
            brave.search_base().as_deref(),
            Some("https://api.search.brave.com")
        );
        brave.search_url = Some("http://127.0.0.1:9/".parse().unwrap());
        assert_eq!(brave.search_base().as_deref(), Some("http://127.0.0.1:9"));
    }
}
