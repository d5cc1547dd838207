//! The `[email]` section: owned by the adapter, read from the config's unknown tables (and
//! `HERALD_EMAIL__…` environment variables, which land in the same table).
//!
//! Must not: print the password (a `Secret`), or fall back to an unencrypted connection unless
//! `insecure = true` says so.

use serde::{Deserialize, Serialize};

use crate::config::Secret;

/// How both connections are encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum EmailTls {
    /// TLS from the first byte (IMAP 993, SMTP 465).
    #[default]
    Implicit,
    /// A plain connection upgraded with STARTTLS before login (IMAP 143, SMTP 587).
    Starttls,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmailConfig {
    /// The mailbox's own address: the From of every reply. The adapter runs when it is set.
    pub address: Option<String>,
    pub imap_host: Option<String>,
    /// 993 with implicit TLS, 143 with STARTTLS or `insecure`.
    pub imap_port: Option<u16>,
    pub smtp_host: Option<String>,
    /// 465 with implicit TLS, 587 with STARTTLS or `insecure`.
    pub smtp_port: Option<u16>,
    /// The login of both servers; `address` when unset.
    pub username: Option<String>,
    pub password: Option<Secret>,
    /// The environment variable holding the password, when `password` is not set.
    pub password_env: Option<String>,
    pub tls: EmailTls,
    /// Plain, unencrypted connections (local tests only): never on a real network.
    pub insecure: bool,
    /// The folder new mail is read from.
    pub mailbox: String,
    /// Where handled mail is moved; unset: it stays and gets the \Seen flag.
    pub processed_folder: Option<String>,
    /// Where the server keeps a copy of sent mail (looked in before resending a reply that
    /// was in flight at a crash); empty: never looked in.
    pub sent_folder: String,
    /// Addresses (`alice@example.org`) or whole domains (`@example.org`) answered.
    pub allowed_senders: Vec<String>,
    /// Mail must pass the receiving server's DKIM, SPF or DMARC verdict for its From
    /// (Authentication-Results), else it is ignored and logged.
    pub require_auth: bool,
    /// Seconds between looks where the server has no IDLE (and the longest IDLE wait).
    pub poll_secs: u64,
}

impl Default for EmailConfig {
    fn default() -> Self {
        EmailConfig {
            address: None,
            imap_host: None,
            imap_port: None,
            smtp_host: None,
            smtp_port: None,
            username: None,
            password: None,
            password_env: None,
            tls: EmailTls::Implicit,
            insecure: false,
            mailbox: "INBOX".into(),
            processed_folder: None,
            sent_folder: "Sent".into(),
            allowed_senders: Vec::new(),
            require_auth: true,
            poll_secs: 60,
        }
    }
}

/// What is wrong with a section, named by its key (start exits with this text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmailConfigError {
    #[error("email.address must be an address like herald@example.org")]
    Address,
    #[error("email.imap_host is not set")]
    NoImapHost,
    #[error("email.smtp_host is not set")]
    NoSmtpHost,
    #[error("email.password (or email.password_env naming a set variable) is not set")]
    NoPassword,
    #[error("email.allowed_senders entry {0:?} is neither an address nor @domain")]
    Sender(String),
    #[error("email.poll_secs must be at least 1")]
    PollSecs,
    #[error("email.mailbox must not be empty")]
    Mailbox,
}

impl EmailConfig {
    /// The checks that need no network; both logins are tried at start and by `herald doctor`.
    pub fn check(&self) -> Result<(), EmailConfigError> {
        let address = self.address.as_deref().unwrap_or("");
        if !is_address(address) {
            return Err(EmailConfigError::Address);
        }
        if self.imap_host().is_empty() {
            return Err(EmailConfigError::NoImapHost);
        }
        if self.smtp_host().is_empty() {
            return Err(EmailConfigError::NoSmtpHost);
        }
        if self.password().is_none() {
            return Err(EmailConfigError::NoPassword);
        }
        if let Some(bad) = self.allowed_senders.iter().find(|s| !is_sender_entry(s)) {
            return Err(EmailConfigError::Sender(bad.clone()));
        }
        if self.poll_secs == 0 {
            return Err(EmailConfigError::PollSecs);
        }
        if self.mailbox.trim().is_empty() {
            return Err(EmailConfigError::Mailbox);
        }
        Ok(())
    }

    /// The password: `password`, else the variable `password_env` names.
    pub fn password(&self) -> Option<Secret> {
        if let Some(p) = self.password.as_ref().filter(|p| !p.expose().is_empty()) {
            return Some(p.clone());
        }
        let var = self.password_env.as_deref()?;
        std::env::var(var)
            .ok()
            .filter(|v| !v.is_empty())
            .map(Secret::new)
    }

    /// The address, lower-cased, once `check` passed.
    pub fn me(&self) -> String {
        self.address.as_deref().unwrap_or("").trim().to_lowercase()
    }

    pub fn login(&self) -> String {
        self.username.clone().unwrap_or_else(|| self.me())
    }

    pub fn imap_host(&self) -> &str {
        self.imap_host.as_deref().unwrap_or("").trim()
    }

    pub fn smtp_host(&self) -> &str {
        self.smtp_host.as_deref().unwrap_or("").trim()
    }

    pub fn imap_port(&self) -> u16 {
        self.imap_port.unwrap_or(match (self.insecure, self.tls) {
            (false, EmailTls::Implicit) => 993,
            _ => 143,
        })
    }

    pub fn smtp_port(&self) -> u16 {
        self.smtp_port.unwrap_or(match (self.insecure, self.tls) {
            (false, EmailTls::Implicit) => 465,
            _ => 587,
        })
    }

    /// The domain of our own Message-IDs.
    pub fn domain(&self) -> String {
        let me = self.me();
        me.rsplit_once('@')
            .map_or(me.clone(), |(_, d)| d.to_string())
    }
}

/// `local@domain`, with a dot in the domain or `localhost`-like single labels allowed.
pub fn is_address(s: &str) -> bool {
    let s = s.trim();
    match s.rsplit_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !s
                    .chars()
                    .any(|c| c.is_whitespace() || matches!(c, '<' | '>' | ','))
        }
        None => false,
    }
}

/// An `allowed_senders` entry: an address, or `@domain`.
pub fn is_sender_entry(s: &str) -> bool {
    match s.strip_prefix('@') {
        Some(domain) => !domain.is_empty() && !domain.contains('@') && !domain.contains(' '),
        None => is_address(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> EmailConfig {
        EmailConfig {
            address: Some("Herald@Example.org".into()),
            imap_host: Some("imap.example.org".into()),
            smtp_host: Some("smtp.example.org".into()),
            password: Some(Secret::new("app-password")),
            allowed_senders: vec!["alice@example.org".into(), "@example.com".into()],
            ..EmailConfig::default()
        }
    }

    #[test]
    fn check_names_the_key_at_fault() {
        use EmailConfigError as E;
        assert_eq!(good().check(), Ok(()));
        type Change = Box<dyn Fn(&mut EmailConfig)>;
        let cases: Vec<(Change, E)> = vec![
            (Box::new(|c| c.address = Some("nobody".into())), E::Address),
            (Box::new(|c| c.imap_host = None), E::NoImapHost),
            (Box::new(|c| c.smtp_host = None), E::NoSmtpHost),
            (Box::new(|c| c.password = None), E::NoPassword),
            (
                Box::new(|c| c.allowed_senders.push("example.org".into())),
                E::Sender("example.org".into()),
            ),
            (Box::new(|c| c.poll_secs = 0), E::PollSecs),
        ];
        for (change, want) in cases {
            let mut c = good();
            change(&mut c);
            assert_eq!(c.check(), Err(want));
        }
        assert!(E::NoPassword.to_string().contains("email.password"));
    }

    #[test]
    fn ports_follow_the_tls_mode_and_the_password_never_prints() {
        let mut c = good();
        assert_eq!((c.imap_port(), c.smtp_port()), (993, 465));
        c.tls = EmailTls::Starttls;
        assert_eq!((c.imap_port(), c.smtp_port()), (143, 587));
        c.imap_port = Some(1143);
        assert_eq!(c.imap_port(), 1143);
        assert_eq!(c.me(), "herald@example.org");
        assert_eq!(c.domain(), "example.org");
        assert_eq!(c.login(), "herald@example.org");
        assert!(!format!("{c:?}").contains("app-password"));
    }

    #[test]
    fn password_from_the_environment() {
        let mut c = good();
        c.password = None;
        c.password_env = Some("HERALD_TEST_EMAIL_PASSWORD_UNSET_VAR".into());
        assert!(c.password().is_none());
    }
}
