//! Live configuration reload: SIGHUP, `herald reload` (the admin API) and, with
//! `reload.watch`, a change of the config file re-read the configuration with the loader and
//! checks of the start, and apply what changed in place.
//!
//! A [`Reloader`] holds the running configuration and its generation, and the parts that can
//! take a new one live (each a [`Part`]: the keys it owns and how it applies them; built in
//! `app/build.rs`, so this module knows no part's type). A file that does not load or
//! validate changes nothing: the error is logged, returned and kept for the admin page. Keys
//! no part owns are reported by name as needing a restart and keep running as they were.
//! Reloads run one at a time. Must not: apply half of a configuration that failed its checks.

pub mod diff;
pub mod watch;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::config::{Config, LoadOptions};

/// Applies the keys of a part from a new configuration.
pub type Apply = Box<
    dyn Fn(Arc<Config>) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync,
>;

/// Something that takes changed keys live: `owns` says which (several parts may own one key;
/// each then applies it).
pub struct Part {
    pub name: &'static str,
    pub owns: Box<dyn Fn(&str) -> bool + Send + Sync>,
    pub apply: Apply,
}

/// What a reload did.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Report {
    /// The configuration generation now running (1 at start).
    pub generation: u64,
    /// Changed keys applied in place.
    pub applied: Vec<String>,
    /// Changed keys left as they were until a restart.
    pub restart_needed: Vec<String>,
}

#[derive(Default)]
struct State {
    current: Arc<Config>,
    generation: u64,
    last_error: Option<String>,
    /// Keys changed by reloads since the start that still wait for a restart.
    pending_restart: std::collections::BTreeSet<String>,
}

/// What the admin page shows.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub generation: u64,
    pub last_error: Option<String>,
    pub restart_needed: Vec<String>,
}

pub struct Reloader {
    state: Mutex<State>,
    /// Where `reload()` reads from: the daemon's file and environment (unset in tests that
    /// hand configurations in).
    source: Mutex<Option<LoadOptions>>,
    parts: Vec<Part>,
    one_at_a_time: tokio::sync::Mutex<()>,
}

impl Reloader {
    pub fn new(current: Arc<Config>, parts: Vec<Part>) -> Reloader {
        Reloader {
            state: Mutex::new(State {
                current,
                generation: 1,
                ..State::default()
            }),
            source: Mutex::new(None),
            parts,
            one_at_a_time: tokio::sync::Mutex::new(()),
        }
    }

    /// Reads from `source` from now on (`herald serve` sets its own).
    pub fn set_source(&self, source: LoadOptions) {
        *self.source.lock().expect("source lock") = Some(source);
    }

    pub fn source(&self) -> Option<LoadOptions> {
        self.source.lock().expect("source lock").clone()
    }

    pub fn current(&self) -> Arc<Config> {
        self.state.lock().expect("reload state").current.clone()
    }

    pub fn status(&self) -> Status {
        let s = self.state.lock().expect("reload state");
        Status {
            generation: s.generation,
            last_error: s.last_error.clone(),
            restart_needed: s.pending_restart.iter().cloned().collect(),
        }
    }

    /// Loads the configuration from the source again and applies it.
    pub async fn reload(&self) -> Result<Report, String> {
        let Some(source) = self.source() else {
            return Err("this process has no configuration source to reload from".into());
        };
        match crate::config::load(&source) {
            Ok(c) => self.apply(c).await,
            Err(e) => Err(self.failed(e.to_string())),
        }
    }

    /// Checks `new` as the start does, then applies what changed.
    pub async fn apply(&self, mut new: Config) -> Result<Report, String> {
        let _one = self.one_at_a_time.lock().await;
        crate::config::link_api_keys(&mut new);
        if let Err(e) = crate::config::validate(&new) {
            return Err(self.failed(e.to_string()));
        }
        for (i, h) in new.hooks.iter().enumerate() {
            if let Err(e) = h.resolve_secret() {
                return Err(self.failed(format!("hooks[{i}].secret_env: {e}")));
            }
        }
        let new = Arc::new(new);
        let changed = diff::changed(&self.current(), &new);
        let mut report = Report::default();
        let mut run = Vec::new();
        for key in &changed {
            // Every part that reads a key takes it (`people`: the turn and the approvals).
            let owners: Vec<usize> = (0..self.parts.len())
                .filter(|&i| (self.parts[i].owns)(key))
                .collect();
            if owners.is_empty() || diff::RESTART_ONLY.contains(&key.as_str()) {
                report.restart_needed.push(key.clone());
                continue;
            }
            report.applied.push(key.clone());
            for i in owners {
                if !run.contains(&i) {
                    run.push(i);
                }
            }
        }
        run.sort_unstable();
        for i in run {
            let part = &self.parts[i];
            if let Err(e) = (part.apply)(new.clone()).await {
                return Err(self.failed(format!("applying {}: {e}", part.name)));
            }
        }
        let mut s = self.state.lock().expect("reload state");
        if !changed.is_empty() {
            s.generation += 1;
            s.current = new;
        }
        s.last_error = None;
        s.pending_restart
            .extend(report.restart_needed.iter().cloned());
        report.generation = s.generation;
        tracing::info!(
            generation = report.generation,
            applied = ?report.applied,
            restart_needed = ?report.restart_needed,
            "configuration reloaded"
        );
        Ok(report)
    }

    fn failed(&self, error: String) -> String {
        tracing::error!(error = %error, "configuration reload refused; the running configuration stays");
        self.state.lock().expect("reload state").last_error = Some(error.clone());
        error
    }
}
