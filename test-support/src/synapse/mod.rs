//! Matrix for the tests, for real: a Synapse homeserver per test ([`Synapse`], from the venv
//! scripts/synapse.sh makes), the people on it as real matrix-sdk clients with their own
//! crypto stores ([`Person`]), and a pass-through in front of it for the bot ([`Gate`]) that
//! records when the homeserver accepted each message and can answer the next one with
//! Synapse's own 429.
//!
//! Nothing here fakes Matrix: the homeserver is the real one, and the only thing the gate adds
//! is a 429 in Synapse's wire format where a test asks for it.

mod gate;
mod person;
mod server;

pub use gate::Gate;
pub use person::{view, Person, Shown, WAIT};
pub use server::{synapse_python, Synapse, SERVER_NAME};

/// The bot's password on every test homeserver.
pub const BOT_PASSWORD: &str = "herald-bot-password";

/// Registers the bot (`@herald:localhost`) and `people` (password = their name), and returns
/// a config holding only the `[matrix]` table (moved into a test's config by [`add_section`]) for a daemon logging in as the bot through `homeserver` (the gate, or
/// Synapse itself) with `allowed` on its allowlist and `extra` TOML lines.
pub async fn bot_section(
    synapse: &Synapse,
    homeserver: &str,
    people: &[&str],
    allowed: &[&str],
    extra: &str,
) -> herald::config::Config {
    let bot = synapse.register("herald", BOT_PASSWORD).await;
    for p in people {
        synapse.register(p, p).await;
    }
    let allowed: Vec<String> = allowed
        .iter()
        .map(|a| format!("\"{}\"", Synapse::user_id(a)))
        .collect();
    let toml = format!(
        "[matrix]\nhomeserver_url = \"{homeserver}\"\nuser_id = \"{bot}\"\npassword = \"{BOT_PASSWORD}\"\n\
         allowed_users = [{}]\n{extra}",
        allowed.join(", ")
    );
    herald::config::from_toml(&toml).expect("a [matrix] section")
}

/// Moves the `[matrix]` table of `section` (from [`bot_section`]) into `config`.
pub fn add_section(config: &mut herald::config::Config, mut section: herald::config::Config) {
    let table = section.sections.remove("matrix").expect("the matrix table");
    config.sections.insert("matrix".into(), table);
}
