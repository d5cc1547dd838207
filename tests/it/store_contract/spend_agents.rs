//! Spend contracts for agents: every row carries the agent that made the call, and an agent's
//! caps count that agent's rows only (its day, and one person's day with it), on both backends.

use std::sync::Arc;

use herald::domain::{Cap, Payer};
use herald::store::{Billed, CapLimit, NewHold, SpendScope, Store};

fn hold(agent: &str, person: &str, held: i64) -> NewHold {
    NewHold {
        lane: format!("web:{person}"),
        agent: agent.into(),
        payer: Payer::Person(person.into()),
        job: None,
        run: None,
        cause: "turn".into(),
        model: "m".into(),
        day: "2026-12-02".into(),
        month: "2026-12".into(),
        held,
        expires_at: i64::MAX,
    }
}

fn agent_day(agent: &str, limit: i64) -> CapLimit {
    CapLimit {
        cap: Cap::AgentDaily(agent.into()),
        period: "2026-12-02".into(),
        scope: SpendScope::AgentDay {
            agent: agent.into(),
            day: "2026-12-02".into(),
        },
        limit,
    }
}

pub async fn agent_caps_count_their_agents_rows(store: Arc<dyn Store>) {
    let s = &*store;
    // The default agent spent 50 for ann; the coder 30 for ann and 5 for bob.
    s.spend_record(&hold("default", "ann", 0), Some(50), Billed::default())
        .await
        .unwrap();
    let r = s
        .spend_reserve(&hold("coder", "ann", 30), &[agent_day("coder", 40)])
        .await
        .unwrap()
        .expect("30 of 40 fits");
    s.spend_settle(r.id, Some(30), Billed::default())
        .await
        .unwrap();
    s.spend_record(&hold("coder", "bob", 0), Some(5), Billed::default())
        .await
        .unwrap();
    let day = "2026-12-02".to_string();
    let coder = SpendScope::AgentDay {
        agent: "coder".into(),
        day: day.clone(),
    };
    assert_eq!(s.spend_sum(&coder).await.unwrap(), 35);
    let ann_coder = SpendScope::AgentPersonDay {
        agent: "coder".into(),
        person: "ann".into(),
        day: day.clone(),
    };
    assert_eq!(s.spend_sum(&ann_coder).await.unwrap(), 30);
    assert_eq!(s.spend_sum(&SpendScope::Day(day)).await.unwrap(), 85);

    // 35 spent: 6 more would pass the coder's 40; the default agent's rows do not count.
    let hit = s
        .spend_reserve(&hold("coder", "bob", 6), &[agent_day("coder", 40)])
        .await
        .unwrap()
        .expect_err("35 + 6 passes 40");
    assert_eq!(
        (hit.cap, hit.spent, hit.limit),
        (Cap::AgentDaily("coder".into()), 35, 40)
    );
    s.spend_reserve(&hold("default", "bob", 6), &[agent_day("default", 60)])
        .await
        .unwrap()
        .expect("the default agent's 50 + 6 fits its 60");
    // A grant filed under the agent's cap raises that cap only.
    s.spend_grant(&Cap::AgentDaily("coder".into()), "2026-12-02", 10, "test")
        .await
        .unwrap();
    s.spend_reserve(&hold("coder", "bob", 6), &[agent_day("coder", 40)])
        .await
        .unwrap()
        .expect("the grant makes room");

    let rows = s.spend_rows(0).await.unwrap();
    let agents: Vec<(&str, Option<&str>)> = rows
        .iter()
        .map(|r| (r.agent.as_str(), r.person.as_deref()))
        .collect();
    assert_eq!(
        agents,
        [
            ("default", Some("ann")),
            ("coder", Some("ann")),
            ("coder", Some("bob")),
            ("default", Some("bob")),
            ("coder", Some("bob")),
        ]
    );
}
