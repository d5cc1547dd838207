//! URLs in the configuration, parsed once while the file and environment are read.
//!
//! A `ConfigUrl` keeps the text exactly as the operator wrote it (so `doctor`, logs and the
//! documented defaults show what was configured, with no trailing slash added) next to the
//! parsed [`Url`], so no caller parses it again and a value that is not a URL fails the load
//! with an error that names its key. Scheme rules (http(s) only) stay in `validate.rs`, where
//! their messages name the key the same way as every other rule.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use url::Url;

/// A configured value that is not a URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a URL ({source})")]
pub struct NotAUrl {
    text: String,
    #[source]
    source: url::ParseError,
}

#[derive(Clone, PartialEq, Eq)]
pub struct ConfigUrl {
    text: String,
    url: Url,
}

impl ConfigUrl {
    /// Parses `text`; the error says what is wrong in words an operator can act on.
    pub fn parse(text: &str) -> Result<ConfigUrl, NotAUrl> {
        match Url::parse(text) {
            Ok(url) => Ok(ConfigUrl {
                text: text.to_string(),
                url,
            }),
            Err(source) => Err(NotAUrl {
                text: text.to_string(),
                source,
            }),
        }
    }

    /// The text as configured.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The parsed URL.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// Whether the scheme is `http` or `https`.
    pub fn is_http(&self) -> bool {
        matches!(self.url.scheme(), "http" | "https")
    }
}

impl std::str::FromStr for ConfigUrl {
    type Err = NotAUrl;

    fn from_str(s: &str) -> Result<ConfigUrl, NotAUrl> {
        ConfigUrl::parse(s)
    }
}

impl fmt::Display for ConfigUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for ConfigUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.text, f)
    }
}

impl Serialize for ConfigUrl {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for ConfigUrl {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ConfigUrl, D::Error> {
        let text = String::deserialize(d)?;
        ConfigUrl::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_text_and_refuses_what_is_not_a_url() {
        let u = ConfigUrl::parse("https://api.telegram.org").unwrap();
        assert_eq!(u.as_str(), "https://api.telegram.org");
        assert_eq!(u.url().path(), "/");
        assert!(u.is_http());
        assert!(!ConfigUrl::parse("ftp://x").unwrap().is_http());
        let err = ConfigUrl::parse("not a url").unwrap_err().to_string();
        assert!(err.starts_with("\"not a url\" is not a URL"), "{err}");
    }
}
