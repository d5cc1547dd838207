//! `judge = "…"`: a question about a case's reply put to a model, passing on a "yes". The
//! judge is `[[eval.judge]]` of the configuration the case ran under, or that configuration's
//! own `[llm]` chain when none is set, asked outside any lane: its call is not part of the
//! case's tokens or cost.

use crate::config::Config;
use crate::domain::Role;
use crate::llm::{ChatMessage, ChatRequest, ProviderChain};

pub struct Judge {
    chain: ProviderChain,
}

impl Judge {
    pub fn new(config: &Config) -> anyhow::Result<Judge> {
        Ok(Judge {
            chain: crate::llm::judge_chain(config)?,
        })
    }

    /// `None` when the judge says yes, else why not.
    pub async fn verdict(
        &self,
        question: &str,
        messages: &[String],
        reply: &str,
    ) -> Option<String> {
        let system = "You judge a chat assistant's reply. Answer the question about it with \
                      one word, yes or no, then nothing else.";
        let user = format!(
            "The person wrote:\n{}\n\nThe assistant replied:\n{reply}\n\nQuestion: {question}",
            messages.join("\n")
        );
        let req = ChatRequest {
            messages: vec![
                ChatMessage::new(Role::System, system),
                ChatMessage::new(Role::User, user),
            ],
            tools: Vec::new(),
        };
        match self.chain.chat(&req).await {
            Ok(r) => {
                let answer = r.content.unwrap_or_default();
                let first = answer
                    .trim()
                    .trim_start_matches(|c: char| !c.is_alphanumeric())
                    .to_lowercase();
                if first.starts_with("yes") {
                    None
                } else {
                    Some(format!("judge said {:?} to {question:?}", answer.trim()))
                }
            }
            Err(e) => Some(format!("judge unavailable: {e}")),
        }
    }
}
