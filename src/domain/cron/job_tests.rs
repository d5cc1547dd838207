//! Table tests for job specs: TOML parsing, validation messages, and `[SILENT]`.

use figment::providers::{Format, Toml};
use figment::Figment;

use super::super::target::test_known;
use super::*;

fn spec(name: &str, schedule: &str, deliver: &[&str]) -> JobSpec {
    JobSpec {
        name: name.to_string(),
        schedule: schedule.to_string(),
        prompt: "Write the morning brief.".to_string(),
        deliver: deliver.iter().map(|s| s.to_string()).collect(),
        timezone: None,
        catch_up: None,
        enabled: true,
        budget: None,
    }
}

#[test]
fn config_table_deserializes_with_defaults() {
    #[derive(Debug, Deserialize)]
    struct Cron {
        jobs: Vec<JobSpec>,
    }
    let toml_text = r#"
        [[jobs]]
        name = "morning-brief"
        schedule = "0 7 * * 1-5"
        timezone = "Europe/Berlin"
        prompt = "Summarize overnight mail."
        deliver = ["telegram:-1001234567890:7", "web:main"]
        catch_up = "skip"

        [[jobs]]
        name = "ping"
        schedule = "every 2h"
        prompt = "Anything due?"
        deliver = ["discord:123456789012345678"]
        enabled = false
    "#;
    let cron: Cron = Figment::from(Toml::string(toml_text))
        .extract()
        .expect("config parses");
    let brief = cron.jobs[0].validate(&test_known()).expect("valid job");
    assert_eq!(brief.lane().as_str(), "cron:morning-brief");
    assert_eq!(brief.catch_up, CatchUp::Skip);
    assert!(brief.enabled);
    let lanes: Vec<String> = brief
        .targets
        .iter()
        .map(|t| t.lane_key().to_string())
        .collect();
    assert_eq!(lanes, ["telegram:-1001234567890:7", "web:main"]);
    let ping = cron.jobs[1].validate(&test_known()).expect("valid job");
    assert_eq!(ping.catch_up, CatchUp::Once, "once is the default");
    assert!(!ping.enabled);

    let typo = Figment::from(Toml::string(
        "[[jobs]]\nname = \"x\"\nschedule = \"every 1h\"\nprompt = \"p\"\ncatchup = \"skip\"\n",
    ))
    .extract::<Cron>()
    .expect_err("unknown field");
    assert!(typo.to_string().contains("catchup"), "{typo}");
}

#[test]
fn validation_table() {
    let ok = ["telegram:42"];
    let mut bad_tz = spec("brief", "0 7 * * *", &ok);
    bad_tz.timezone = Some("Europe/Berln".into());
    let mut bad_policy = spec("brief", "0 7 * * *", &ok);
    bad_policy.catch_up = Some("always".into());
    let mut no_prompt = spec("brief", "0 7 * * *", &ok);
    no_prompt.prompt = " \n".into();
    let long = "x".repeat(65);
    let cases: Vec<(JobSpec, &str)> = vec![
        (
            spec("", "every 1h", &ok),
            "invalid cron job name \"\": use 1-64 characters",
        ),
        (
            spec("morning brief", "every 1h", &ok),
            "invalid cron job name \"morning brief\"",
        ),
        (
            spec("brief:x", "every 1h", &ok),
            "invalid cron job name \"brief:x\"",
        ),
        (spec("brïef", "every 1h", &ok), "invalid cron job name"),
        (spec(&long, "every 1h", &ok), "invalid cron job name"),
        (
            spec("brief", "0 7 * *", &ok),
            "cron job \"brief\": invalid cron expression \"0 7 * *\": expected 5 fields",
        ),
        (
            spec("brief", "every 0m", &ok),
            "cron job \"brief\": invalid interval \"every 0m\"",
        ),
        (
            bad_tz,
            "cron job \"brief\": unknown time zone \"Europe/Berln\"",
        ),
        (
            spec("brief", "every 1h", &["sms:123"]),
            "cron job \"brief\": unknown platform \"sms\"",
        ),
        (
            spec("brief", "every 1h", &["telegram:abc"]),
            "cron job \"brief\": invalid delivery target \"telegram:abc\"",
        ),
        (
            spec("brief", "every 1h", &[]),
            "cron job \"brief\": no delivery targets",
        ),
        (
            spec("brief", "every 1h", &["telegram:42", " Telegram:42"]),
            "cron job \"brief\": the same destination telegram:42 is listed twice",
        ),
        (
            bad_policy,
            "cron job \"brief\": unknown catch_up policy \"always\"",
        ),
        (no_prompt, "cron job \"brief\": the prompt is empty"),
    ];
    for (job, want) in cases {
        let err = job.validate(&test_known()).expect_err(want).to_string();
        assert!(err.contains(want), "got {err:?}, want {want:?}");
    }
    let good = spec(&"a".repeat(64), "every 1h", &ok).validate(&test_known());
    assert!(good.is_ok(), "{good:?}");
    let good = spec(
        "Ops.brief_2-b",
        "every 1h",
        &["web:main", "telegram:42:1", "telegram:42"],
    );
    assert_eq!(good.validate(&test_known()).map(|j| j.targets.len()), Ok(3));
}

#[test]
fn silent_reply_table() {
    for (reply, silent) in [
        ("[SILENT]", true),
        ("  [SILENT]\n", true),
        ("\t[SILENT] ", true),
        ("[silent]", false),
        ("[SILENT] nothing new today", false),
        ("Nothing new. [SILENT]", false),
        ("SILENT", false),
        ("", false),
        ("[ SILENT ]", false),
    ] {
        assert_eq!(is_silent(reply), silent, "{reply:?}");
    }
}
