//! The integration tests, one binary: one module per area (each was its own test binary once).
//! A single binary links herald and the dependencies once instead of once per file, which is
//! most of a cold test build's time and of target/'s size. The fakes and harnesses the modules
//! share live in the `herald-test-support` crate (test-support/), not in this folder.
//!
//! The modules run as threads of one process, so none may change process-global state another
//! module can see: no `std::env::set_var`, no change of the current directory, no fixed ports,
//! no metrics recorder or tracing subscriber of its own (the daemon's are installed once and
//! shared; `harness::init` tolerates an existing subscriber). Asserting exact values of the
//! process-global Prometheus recorder is the one thing that cannot share a process with other
//! apps: that test is `tests/observe_metrics.rs`, its own binary.
//!
//! `cargo test --test it <module>::` runs one area, e.g. `cargo test --test it e2e_telegram::`.

mod compaction_fidelity;
mod compaction_golden;
mod conformance;
mod context_store;
mod crash_loop;
mod crash_restart;
mod data_dir;
mod deploy_files;
mod e2e_agent_loop;
mod e2e_agents;
mod e2e_agents_ops;
mod e2e_anthropic;
mod e2e_api_ids;
mod e2e_approvals;
mod e2e_approvals_group;
mod e2e_budget;
mod e2e_budget_surfaces;
mod e2e_builtin_tools;
mod e2e_context;
mod e2e_cron;
mod e2e_cron_chat;
mod e2e_cron_replicas;
mod e2e_delivery;
mod e2e_discord;
mod e2e_discord_shards;
mod e2e_email;
mod e2e_eval;
mod e2e_fetch_guard;
mod e2e_files;
mod e2e_group_commands;
mod e2e_handoff;
mod e2e_handoff_nightly;
mod e2e_listener;
mod e2e_matrix;
mod e2e_mcp;
mod e2e_mcp_approvals;
mod e2e_mcp_sdk;
mod e2e_media;
mod e2e_memory;
mod e2e_names;
mod e2e_openai_api;
mod e2e_pacing_lanes;
mod e2e_pairing;
mod e2e_payer;
mod e2e_prompt;
mod e2e_reload;
mod e2e_reload_agent;
mod e2e_reload_live;
mod e2e_reload_signal;
mod e2e_screen;
mod e2e_security;
mod e2e_signal;
mod e2e_slack;
mod e2e_slow_body;
mod e2e_steer;
mod e2e_store_text;
mod e2e_stream;
mod e2e_telegram;
mod e2e_user;
mod e2e_voice;
mod e2e_web;
mod e2e_web_fetch;
mod e2e_web_page;
mod e2e_web_search;
mod e2e_webhooks;
mod e2e_whatsapp;
mod failover_pg;
mod fake_discord_selftest;
mod fake_signal_selftest;
mod fake_slack_selftest;
mod fake_telegram_selftest;
mod fake_whatsapp_selftest;
mod faults;
mod fuzz_props;
mod group_commit;
mod handoff_nightly_store;
mod handoff_store;
mod hostile_files;
mod load_smoke;
mod media_fetch;
mod media_readers;
mod observe_admin;
mod observe_doctor;
mod observe_logs;
mod observe_traces;
mod ops_cli;
mod pg_restart;
mod poison;
mod replicas_pg;
mod replicas_share_pg;
mod store_contract;
mod store_statements;
mod tidy;
