//! What a test does when this machine lacks something it needs (no `DATABASE_URL`, no
//! Chromium, no `systemd-analyze`): on a developer's machine it says so and passes; under CI
//! (`CI` set, as `.ci/run` runs) it fails, because CI provides all of them and a test that
//! quietly skipped there would be a hole nobody sees.

/// Whether this run is CI's: `CI` set to anything but empty, `0` or `false`.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// Call where a test would return early for lack of `reason`: prints why and returns (the
/// caller then returns), or panics under CI.
pub fn skip_or_fail(reason: &str) {
    assert!(
        !under_ci(),
        "this test cannot run here and CI must run it: {reason}"
    );
    println!("skipping: {reason}");
}
