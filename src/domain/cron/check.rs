//! The checks a job passes before it is stored: at daemon start for `[[cron.jobs]]`, and in
//! `herald cron add`. Beyond [`JobSpec::validate`], a target must name a platform this
//! deployment actually runs, because a brief addressed to an adapter that is not configured
//! would sit in the outbox forever: that mistake is reported when the job is written, not at
//! 3 a.m. Pure: the caller says which platforms are configured.

use std::collections::HashSet;

use super::job::{JobError, JobSpec, ValidJob};
use super::schedule::ScheduleError;
use super::target::Deliverable;
use crate::domain::Platform;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Job(#[from] JobError),
    #[error(
        "cron job {job:?}: delivery target {target:?} needs the {platform} adapter, which is not configured ({hint})"
    )]
    Unconfigured {
        job: String,
        target: String,
        platform: Platform,
        hint: &'static str,
    },
    #[error("two cron jobs are named {0:?}; job names must be unique")]
    DuplicateName(String),
}

impl CheckError {
    /// The job key an operator has to fix (`deliver`, `schedule`, …).
    pub fn key(&self) -> &'static str {
        match self {
            CheckError::Job(JobError::InvalidName { .. }) | CheckError::DuplicateName(_) => "name",
            CheckError::Job(JobError::Schedule {
                error: ScheduleError::UnknownTimeZone(_),
                ..
            }) => "timezone",
            CheckError::Job(JobError::Schedule { .. }) => "schedule",
            CheckError::Job(JobError::EmptyPrompt { .. }) => "prompt",
            CheckError::Job(JobError::CatchUp { .. }) => "catch_up",
            CheckError::Job(
                JobError::Target { .. }
                | JobError::DuplicateTarget { .. }
                | JobError::NoTargets { .. },
            )
            | CheckError::Unconfigured { .. } => "deliver",
        }
    }
}

/// Validates one job against the platforms this deployment runs.
pub fn check_job(spec: &JobSpec, known: &Deliverable) -> Result<ValidJob, CheckError> {
    let job = spec.validate(known)?;
    for target in &job.targets {
        match known.get(target.platform) {
            Some(d) if d.configured => {}
            other => {
                return Err(CheckError::Unconfigured {
                    job: job.name.clone(),
                    target: target.to_string(),
                    platform: target.platform,
                    hint: other.map_or("", |d| d.how_to_enable),
                })
            }
        }
    }
    Ok(job)
}

/// Validates every job; the error carries the index of the first bad one.
pub fn check_jobs(
    jobs: &[JobSpec],
    known: &Deliverable,
) -> Result<Vec<ValidJob>, (usize, CheckError)> {
    let mut names = HashSet::new();
    let mut out = Vec::with_capacity(jobs.len());
    for (i, spec) in jobs.iter().enumerate() {
        let job = check_job(spec, known).map_err(|e| (i, e))?;
        if !names.insert(job.name.clone()) {
            return Err((i, CheckError::DuplicateName(job.name)));
        }
        out.push(job);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, schedule: &str, tz: Option<&str>, deliver: &[&str]) -> JobSpec {
        JobSpec {
            name: name.into(),
            schedule: schedule.into(),
            prompt: "brief".into(),
            deliver: deliver.iter().map(|s| s.to_string()).collect(),
            timezone: tz.map(Into::into),
            catch_up: None,
            enabled: true,
            budget: None,
        }
    }

    #[test]
    fn errors_name_the_key_to_fix() {
        let mut web = super::super::target::test_known();
        for d in &mut web.platforms {
            d.configured = d.platform == Platform::WEB;
        }
        let cases: &[(JobSpec, &str, &str)] = &[
            (
                spec("a b", "every 1h", None, &["web:x"]),
                "name",
                "invalid cron job name",
            ),
            (
                spec("j", "every 1x", None, &["web:x"]),
                "schedule",
                "unknown unit",
            ),
            (
                spec("j", "0 7 * * *", Some("Mars/Base"), &["web:x"]),
                "timezone",
                "Mars/Base",
            ),
            (
                spec("j", "every 1h", None, &["slack:C1"]),
                "deliver",
                "unknown platform \"slack\"",
            ),
            (
                spec("j", "every 1h", None, &[]),
                "deliver",
                "no delivery targets",
            ),
            (
                spec("j", "every 1h", None, &["telegram:42"]),
                "deliver",
                "needs the telegram adapter, which is not configured (set telegram.token)",
            ),
        ];
        for (job, key, text) in cases {
            let err = check_job(job, &web).expect_err(&job.name);
            assert_eq!(err.key(), *key, "{err}");
            assert!(err.to_string().contains(text), "{err} lacks {text:?}");
        }
    }

    #[test]
    fn configured_platforms_pass_and_duplicate_names_fail() {
        let all = super::super::target::test_known();
        let jobs = [
            spec(
                "a",
                "every 1h",
                None,
                &["telegram:-100:7", "discord:9", "web:x"],
            ),
            spec("b", "0 7 * * *", Some("Europe/Berlin"), &["web:x"]),
        ];
        assert_eq!(check_jobs(&jobs, &all).map(|v| v.len()), Ok(2));
        let dup = [jobs[0].clone(), jobs[0].clone()];
        let (i, err) = check_jobs(&dup, &all).unwrap_err();
        assert_eq!((i, err.key()), (1, "name"));
    }
}
