//! The packaging and deployment files, and the configuration reference, checked against the
//! code: images we build, environment variables that map to real config keys and together
//! yield a config the daemon accepts, probes on the real health routes, ports that match
//! `server.listen`, a systemd unit that `systemd-analyze verify` accepts, and docs that name
//! every config key with its actual default, and README/docs naming only commands, flags, routes
//! and keys the binary has (`cli_docs.rs`).

mod cli_docs;
mod docker_context;
mod docs;
mod support;
mod systemd;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use herald_test_support::herald::Herald;
use serde_json::Value;
use support::*;

fn env_pairs(env: &Value) -> Vec<(String, String)> {
    let obj = env.as_object().expect("environment is a map");
    obj.iter()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => interpolate(s),
                other => other.to_string(),
            };
            (k.clone(), v)
        })
        .collect()
}

fn check_var_names(file: &str, names: impl IntoIterator<Item = String>) {
    let known = config_key_paths();
    let source = all_source();
    for name in names {
        if name.starts_with("HERALD_") {
            if let Err(e) = check_herald_var(&name, &known) {
                panic!("{file}: {e}");
            }
        } else {
            assert!(
                CONVENTIONAL_VARS.contains(&name.as_str())
                    && source.contains(&format!("\"{name}\"")),
                "{file}: {name} is not a variable Herald reads"
            );
        }
    }
}

#[test]
fn compose_runs_two_replicas_of_our_image_on_postgres() {
    let docs = yaml_docs("deploy/compose.yaml");
    let services = docs[0]["services"].as_object().expect("services");
    let mut replicas = BTreeMap::new();
    let mut data_volumes = std::collections::BTreeSet::new();
    for (name, svc) in services {
        let image = svc["image"].as_str().expect("every service names an image");
        if image == POSTGRES_IMAGE {
            assert!(
                svc["healthcheck"]["test"].is_array(),
                "{name} has a healthcheck"
            );
            continue;
        }
        assert_eq!(
            image,
            herald_image(),
            "{name}: only our image or {POSTGRES_IMAGE}"
        );
        let env = env_pairs(&svc["environment"]);
        check_var_names("deploy/compose.yaml", env.iter().map(|(k, _)| k.clone()));
        let herald_env: Vec<_> = env
            .iter()
            .filter(|(k, _)| k.starts_with("HERALD_"))
            .cloned()
            .collect();
        let config = config_from(None, &herald_env)
            .unwrap_or_else(|e| panic!("{name}: the environment is not a valid config: {e}"));
        assert!(
            config.store_url().starts_with("postgres://"),
            "{name} uses Postgres"
        );
        let port = config.server.listen.port();
        let mapping = svc["ports"][0].as_str().expect("a published port");
        assert_eq!(
            port_of(mapping),
            port,
            "{name}: container port matches server.listen"
        );
        assert_eq!(
            svc["depends_on"]["postgres"]["condition"], "service_healthy",
            "{name} waits for the database"
        );
        assert_eq!(
            svc["healthcheck"]["test"][1], "/usr/local/bin/herald-healthcheck",
            "{name}: the health check is the script the image installs"
        );
        let data = config.server.data_dir.to_string_lossy().into_owned();
        let volume = svc["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str()?.split_once(':'))
            .find(|(_, at)| *at == data)
            .map(|(vol, _)| vol.to_string())
            .unwrap_or_else(|| panic!("{name}: no volume at data_dir {data}"));
        data_volumes.insert(volume);
        replicas.insert(config.server.replica_id.clone(), config.store_url());
    }
    // Memory and skills are files in data_dir: replicas with a folder each would split them.
    assert_eq!(
        data_volumes.len(),
        1,
        "the replicas share one data volume: {data_volumes:?}"
    );
    let shared = data_volumes.first().unwrap();
    assert!(
        docs[0]["volumes"].get(shared).is_some(),
        "{shared} is a named volume"
    );
    assert_eq!(
        replicas.len(),
        2,
        "two replicas with distinct replica ids: {replicas:?}"
    );
    let urls: Vec<_> = replicas.values().collect();
    assert_eq!(urls[0], urls[1], "the replicas share one database");
    assert!(
        docs[0]["volumes"].get("pgdata").is_some(),
        "Postgres data lives in a volume"
    );
}

fn by_kind(docs: &[Value], kind: &str) -> Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in deploy/k8s"))
        .clone()
}

#[test]
fn kubernetes_manifests_agree_with_the_daemon() {
    let kustomization = yaml_docs("deploy/k8s/kustomization.yaml");
    let mut docs = Vec::new();
    for file in kustomization[0]["resources"].as_array().expect("resources") {
        docs.extend(yaml_docs(&format!(
            "deploy/k8s/{}",
            file.as_str().expect("path")
        )));
    }
    let deploy = by_kind(&docs, "Deployment");
    let service = by_kind(&docs, "Service");
    let configmap = by_kind(&docs, "ConfigMap");
    // `kubectl apply -k` must never replace the operator's real Secret with placeholders.
    assert!(
        !docs.iter().any(|d| d["kind"] == "Secret"),
        "the kustomization applies a Secret"
    );
    let secret = by_kind(&yaml_docs("deploy/k8s/secret.example.yaml"), "Secret");
    assert_eq!(
        c_env_from_secret(&deploy),
        secret["metadata"]["name"],
        "the pods read the Secret the example describes"
    );

    assert_eq!(deploy["spec"]["replicas"], 2);
    let pod = &deploy["spec"]["template"];
    assert_eq!(
        pod["metadata"]["labels"],
        deploy["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(
        service["spec"]["selector"],
        deploy["spec"]["selector"]["matchLabels"]
    );
    let c = &pod["spec"]["containers"][0];
    assert_eq!(c["image"], herald_image().as_str());
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(pod["spec"]["securityContext"]["runAsNonRoot"], true);
    let dockerfile = read("Dockerfile");
    let uid = pod["spec"]["securityContext"]["runAsUser"].to_string();
    assert!(
        dockerfile.contains(&format!("--uid {uid} ")),
        "runAsUser {uid} is the image's user"
    );

    // The pod's config: the ConfigMap file plus the Deployment's env plus the Secret's keys.
    let toml = configmap["data"]["herald.toml"]
        .as_str()
        .expect("herald.toml");
    let mut env: Vec<(String, String)> = Vec::new();
    for e in c["env"].as_array().expect("env") {
        let name = e["name"].as_str().expect("env name").to_string();
        let value = e["value"]
            .as_str()
            .unwrap_or("pod-name-from-the-downward-api");
        env.push((name, value.to_string()));
    }
    for (k, v) in secret["stringData"].as_object().expect("stringData") {
        let v = v.as_str().expect("string values");
        assert!(
            v.is_empty() || v.contains("CHANGE_ME"),
            "{k}: the template holds placeholders only"
        );
        env.push((k.clone(), v.to_string()));
    }
    check_var_names("deploy/k8s", env.iter().map(|(k, _)| k.clone()));
    let herald_env: Vec<_> = env
        .iter()
        .filter(|(k, _)| k.starts_with("HERALD_"))
        .cloned()
        .collect();
    let config = config_from(Some(toml), &herald_env)
        .unwrap_or_else(|e| panic!("the pod's configuration is refused: {e}"));
    assert!(
        config.store_url().starts_with("postgres://"),
        "replicas share Postgres"
    );

    let port = &c["ports"][0];
    assert_eq!(
        port["containerPort"].as_u64(),
        Some(config.server.listen.port() as u64)
    );
    assert_eq!(service["spec"]["ports"][0]["targetPort"], port["name"]);
    assert_eq!(c["livenessProbe"]["httpGet"]["port"], port["name"]);

    let config_path = env
        .iter()
        .find(|(k, _)| k == "HERALD_CONFIG")
        .expect("HERALD_CONFIG")
        .1
        .clone();
    let mounts = c["volumeMounts"].as_array().expect("mounts");
    let mounted = |path: &str| {
        mounts
            .iter()
            .any(|m| path.starts_with(m["mountPath"].as_str().unwrap_or("?")))
    };
    assert!(
        mounted(&config_path),
        "the ConfigMap is mounted where HERALD_CONFIG points"
    );
    assert!(
        mounted(&config.server.data_dir.to_string_lossy()),
        "data_dir is writable under a read-only root"
    );
    // Memory and skills are files in data_dir: every replica mounts the same claim, and more
    // than one replica needs storage they can all mount read-write.
    let data_mount = mounts
        .iter()
        .find(|m| {
            config
                .server
                .data_dir
                .starts_with(m["mountPath"].as_str().unwrap_or("?"))
        })
        .expect("data_dir mount");
    let volume = pod["spec"]["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == data_mount["name"])
        .expect("the data volume");
    let claim = volume["persistentVolumeClaim"]["claimName"]
        .as_str()
        .unwrap_or_else(|| panic!("data_dir is not a shared claim: {volume}"));
    let pvc = by_kind(&docs, "PersistentVolumeClaim");
    assert_eq!(pvc["metadata"]["name"], claim);
    if deploy["spec"]["replicas"].as_u64() > Some(1) {
        assert_eq!(
            pvc["spec"]["accessModes"],
            serde_json::json!(["ReadWriteMany"]),
            "replicas > 1 share /data"
        );
    }
    pod_env_runs_the_real_binary(toml, &env, &config_path);
    let grace = pod["spec"]["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("grace");
    assert!(
        grace > config.server.shutdown_grace_secs + 10,
        "k8s waits longer than Herald drains"
    );
}

fn c_env_from_secret(deploy: &Value) -> Value {
    deploy["spec"]["template"]["spec"]["containers"][0]["envFrom"][0]["secretRef"]["name"].clone()
}

/// The real binary, given the pod's environment (the Secret's placeholders, `HERALD_CONFIG`
/// pointing at a copy of the ConfigMap's file), accepts its configuration: `skills list` loads
/// the config as `serve` does and touches neither the store nor the network. `HERALD_CONFIG`
/// read as a config key made every command exit 2 here, so every pod crash-looped.
fn pod_env_runs_the_real_binary(toml: &str, env: &[(String, String)], config_path: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("herald.toml");
    std::fs::write(&file, toml).unwrap();
    let mut cmd = Herald::new().args(["skills", "list"]);
    for (k, v) in env {
        let v = if k == "HERALD_CONFIG" {
            assert_eq!(v, config_path);
            file.to_string_lossy().into_owned()
        } else {
            v.clone()
        };
        cmd = cmd.env(k, v);
    }
    let out = cmd.output();
    assert!(
        out.status.success(),
        "herald refuses the pod's environment (exit {:?}): {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("no skills in /data/skills"),
        "the ConfigMap's data_dir is used: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn dockerfile_env_is_real_config_and_needs_a_token() {
    let text = read("Dockerfile");
    let env = dockerfile_env(&text);
    assert!(!env.is_empty());
    check_var_names("Dockerfile", env.iter().map(|(k, _)| k.clone()));
    let err = config_from(None, &env).expect_err("0.0.0.0 without a token is refused");
    assert!(err.contains("web.token"), "{err}");
    let mut with_token = env.clone();
    with_token.push(("HERALD_WEB__TOKEN".into(), "t".into()));
    let config = config_from(None, &with_token).expect("with a token the image's config is valid");
    assert_eq!(config.server.data_dir.to_string_lossy(), "/data");
    assert!(text.contains(&format!("EXPOSE {}", config.server.listen.port())));
    for needle in [
        "cargo build --release --locked",
        "VOLUME /data",
        "USER herald",
        "ENTRYPOINT [\"herald\"]",
        "CMD [\"serve\"]",
        "COPY deploy/docker/healthcheck /usr/local/bin/herald-healthcheck",
    ] {
        assert!(text.contains(needle), "Dockerfile lacks {needle:?}");
    }
    assert!(repo("deploy/docker/healthcheck").exists());
    let ignore = read(".dockerignore");
    for copied in [
        "src/",
        "migrations/",
        "config/",
        "deploy/docker/",
        "test-support/",
    ] {
        assert!(
            ignore.contains(&format!("!{copied}")),
            ".dockerignore keeps {copied}"
        );
    }
}

/// Runs the image's health check script against a real `herald serve`, then against nothing.
#[test]
fn healthcheck_script_tells_a_live_daemon_from_a_dead_one() {
    let port = herald_test_support::harness::free_port();
    let data = tempfile::tempdir().unwrap();
    let mut daemon = Herald::serve(port, data.path())
        .env("RUST_LOG", "warn")
        .silent()
        .spawn();
    let check = || {
        Command::new("bash")
            .arg(repo("deploy/docker/healthcheck"))
            .env("HERALD_SERVER__LISTEN", format!("0.0.0.0:{port}"))
            .status()
            .expect("bash runs")
            .success()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut healthy = false;
    while Instant::now() < deadline {
        if check() {
            healthy = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    daemon.kill();
    assert!(healthy, "the check passes against a running herald");
    assert!(!check(), "the check fails when nothing listens");
}
