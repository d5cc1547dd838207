//! A press on a budget extension question (a row with tool `budget`, opened by
//! `lanes::budget_events`): only a budget approver may answer, the first answer among all the
//! approvers asked about one cap and period wins, and an approval grants the cap's own amount
//! once (`spend_grant`) so the refused person's or job's next call runs.

use serde::Deserialize;

use super::{Approvals, Press, PressOutcome};
use crate::domain::Cap;
use crate::store::{now_ms, ApprovalRow};

#[derive(Deserialize)]
struct Extension {
    cap: Cap,
    period: String,
    amount: i64,
}

impl Approvals {
    pub(super) async fn press_budget(
        &self,
        row: &ApprovalRow,
        p: &Press,
        by: &str,
    ) -> PressOutcome {
        if !self.live().budget_approvers.iter().any(|a| a == by) {
            return PressOutcome::NotYours;
        }
        let Ok(ext) = serde_json::from_str::<Extension>(&row.arguments) else {
            tracing::warn!(approval = %row.id, "a budget question with unreadable arguments");
            return PressOutcome::NotOpen;
        };
        // Every approver got a question about this cap; the first answer closes them all.
        match self
            .store
            .budget_notice_once(&ext.cap, &ext.period, "answered")
            .await
        {
            Ok(true) => {}
            Ok(false) => return PressOutcome::NotOpen,
            Err(e) => {
                tracing::warn!(error = %e, "cannot record a budget answer");
                return PressOutcome::NotOpen;
            }
        }
        match self
            .store
            .approval_answer(&row.id, p.approve, by, now_ms())
            .await
        {
            Ok(true) => {}
            Ok(false) => return PressOutcome::NotOpen,
            Err(e) => {
                tracing::warn!(error = %e, "cannot record a budget answer");
                return PressOutcome::NotOpen;
            }
        }
        let closed = if p.approve {
            if let Err(e) = self
                .store
                .spend_grant(&ext.cap, &ext.period, ext.amount, by)
                .await
            {
                tracing::warn!(error = %e, cap = %ext.cap, "cannot record a budget extension");
                return PressOutcome::NotOpen;
            }
            tracing::info!(cap = %ext.cap, period = %ext.period, amount = ext.amount, by, "budget extended");
            "✅ Extended"
        } else {
            "❌ Not extended"
        };
        if let (Some(msg), Some(out)) = (
            row.prompt_message_id.as_deref(),
            self.outbounds.get(p.platform),
        ) {
            out.ask_closed(
                &row.chat_id,
                row.thread_id.as_deref(),
                msg,
                &format!("{closed}: {}", ext.cap),
            )
            .await;
        }
        if p.approve {
            PressOutcome::Approved
        } else {
            PressOutcome::Denied
        }
    }
}
