//! The systemd unit: the keys an operator relies on, and `systemd-analyze verify` when the
//! tool is on PATH.

use std::collections::BTreeMap;
use std::process::Command;

use super::check_var_names;
use super::support::*;

fn unit_entries(text: &str) -> BTreeMap<(String, String), Vec<String>> {
    let mut section = String::new();
    let mut out: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = s.to_string();
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("line {}: not key=value: {line}", n + 1));
        assert!(!section.is_empty(), "line {}: key outside a section", n + 1);
        out.entry((section.clone(), k.trim().to_string()))
            .or_default()
            .push(v.trim().to_string());
    }
    out
}

#[test]
fn systemd_unit_is_hardened_notify_service() {
    let text = read("deploy/systemd/herald.service");
    let unit = unit_entries(&text);
    let get = |k: &str| {
        unit.get(&("Service".to_string(), k.to_string()))
            .map(|v| v.join(" "))
    };
    for (key, want) in [
        ("Type", "notify"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("ReadWritePaths", "/var/lib/herald"),
        ("User", "herald"),
        ("CapabilityBoundingSet", ""),
        ("EnvironmentFile", "-/etc/herald/herald.env"),
        ("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6"),
    ] {
        assert_eq!(get(key).as_deref(), Some(want), "[Service] {key}");
    }
    assert!(get("SystemCallFilter").is_some_and(|v| v.contains("@system-service")));
    let watchdog: u64 = get("WatchdogSec")
        .expect("WatchdogSec")
        .parse()
        .expect("seconds");
    assert!(watchdog >= 10, "pings every WatchdogSec/2 need slack");
    let stop: u64 = get("TimeoutStopSec")
        .expect("TimeoutStopSec")
        .parse()
        .expect("seconds");
    assert!(stop > herald::config::Config::default().server.shutdown_grace_secs + 10);
    let env = get("Environment").expect("Environment");
    let (name, _) = env.split_once('=').expect("NAME=value");
    check_var_names("herald.service", [name.to_string()]);
    assert!(get("ExecStart").is_some_and(|v| v.ends_with(" serve")));
    assert!(unit.contains_key(&("Install".to_string(), "WantedBy".to_string())));

    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        herald_test_support::skip_or_fail(
            "systemd-analyze not on PATH: no `systemd-analyze verify`",
        );
        return;
    }
    // verify checks that ExecStart exists: point it at the binary this test run built.
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("herald.service");
    std::fs::write(
        &good,
        text.replace("/usr/local/bin/herald", env!("CARGO_BIN_EXE_herald")),
    )
    .unwrap();
    let complaints = verify(&good);
    assert!(
        complaints.is_empty(),
        "systemd-analyze verify: {complaints}"
    );
    // verify reports unknown keys as warnings with exit 0: prove such output is caught.
    let bad = dir.path().join("broken.service");
    std::fs::write(
        &bad,
        format!(
            "{}\n[Service]\nNoSuchKey=1\n",
            std::fs::read_to_string(&good).unwrap()
        ),
    )
    .unwrap();
    assert!(
        verify(&bad).contains("NoSuchKey"),
        "a broken unit is reported"
    );
}

/// Lines of `systemd-analyze verify` output about this unit file (errors and warnings).
fn verify(unit: &std::path::Path) -> String {
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(unit)
        .output()
        .expect("systemd-analyze runs");
    let name = unit.file_name().unwrap().to_string_lossy().to_string();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines: Vec<&str> = text.lines().filter(|l| l.contains(&name)).collect();
    if !out.status.success() {
        lines.push("(non-zero exit)");
    }
    lines.join("\n")
}

/// The install recipe in the unit's header, replayed on paper: the folders and files it
/// creates with their owner, group and mode, and the unit's `User=` must be able to open the
/// `--config` file of `ExecStart` (a 0750 root folder and a 0640 root file cannot).
#[test]
fn the_install_recipe_leaves_the_config_readable_by_the_service_user() {
    let text = read("deploy/systemd/herald.service");
    let unit = unit_entries(&text);
    let service = |k: &str| {
        unit.get(&("Service".to_string(), k.to_string()))
            .map(|v| v.join(" "))
            .unwrap_or_else(|| panic!("[Service] {k}"))
    };
    let user = service("User");
    let group = service("Group");
    let exec = service("ExecStart");
    let config = exec
        .split_whitespace()
        .skip_while(|w| *w != "--config")
        .nth(1)
        .expect("ExecStart names --config");
    // path -> (owner, group, mode)
    let mut made: BTreeMap<String, (String, String, u32)> = BTreeMap::new();
    for line in text.lines() {
        let Some(cmd) = line.trim_start_matches('#').trim().strip_prefix("install ") else {
            continue;
        };
        let words: Vec<&str> = cmd.split('#').next().unwrap().split_whitespace().collect();
        let (mut owner, mut grp, mut mode, mut dir) = ("root", "root", 0o755, false);
        let mut rest = Vec::new();
        let mut i = 0;
        while i < words.len() {
            match words[i] {
                "-d" => dir = true,
                "-o" => {
                    owner = words[i + 1];
                    i += 1;
                }
                "-g" => {
                    grp = words[i + 1];
                    i += 1;
                }
                "-m" => {
                    mode = u32::from_str_radix(words[i + 1], 8).expect("octal mode");
                    i += 1;
                }
                w => rest.push(w),
            }
            i += 1;
        }
        let target = if dir { rest[0] } else { rest[rest.len() - 1] };
        made.insert(target.to_string(), (owner.into(), grp.into(), mode));
    }
    let can = |path: &str, bit: u32| {
        let (owner, grp, mode) = made
            .get(path)
            .unwrap_or_else(|| panic!("the recipe does not create {path}"));
        let shift = if *owner == user {
            6
        } else if *grp == group {
            3
        } else {
            0
        };
        mode >> shift & bit != 0
    };
    let folder = std::path::Path::new(config).parent().unwrap();
    assert!(
        can(folder.to_str().unwrap(), 0o1),
        "{user} cannot enter {}",
        folder.display()
    );
    assert!(can(config, 0o4), "{user} cannot read {config}");
    assert!(
        !can(config, 0o2),
        "{user} must not be able to rewrite {config}"
    );
}
