//! The cases of the suite about things beyond one text: a photo and a document in, a file
//! out, and a handoff capsule wrapping the conversation. Written once over any [`Rig`].

use std::time::Duration;

use base64::Engine as _;
use herald::domain::{BuildStatus, LaneKey, SessionId};
use herald::handoff::ACK;
use herald_test_support::fake_llm::Step;
use herald_test_support::handoff::{assert_capsule_received_once, assert_writer_request};
use herald_test_support::harness::wait_for;
use herald_test_support::mcp::{chart, chart_then_attach, shop_ready, shop_with_starts};

use super::cases::{seen_settled, texts, WAIT};
use super::{Rig, Seen, Who};

/// A PNG's signature and header chunk: enough for a sniffer.
fn png() -> Vec<u8> {
    let mut b = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
    b.extend_from_slice(&[
        0, 0, 0, 13, b'I', b'H', b'D', b'R', 0, 0, 0, 1, 0, 0, 0, 1, 8, 2, 7,
    ]);
    b
}

/// Case 6: A photo reaches a model that sees as the image itself, a document as its text. A
/// platform without file input (the web chat) carries the person's words and no image.
pub async fn files_in<R: Rig>() {
    let rig = R::start(|c| c.llm.vision = true).await;
    let photo = png();
    rig.photo(&photo, "what is this?").await;
    seen_settled(&rig, Who::Owner, 1).await;
    let req = rig.llm().last_request();
    assert!(
        req.last_user().contains("what is this?"),
        "{}",
        req.last_user()
    );
    let images: Vec<String> = req.images().into_iter().map(|(_, url)| url).collect();
    if !R::caps().declared.files_in {
        assert_eq!(images, Vec::<String>::new(), "the web chat takes no file");
        rig.stop().await;
        return;
    }
    let b64 = base64::engine::general_purpose::STANDARD.encode(&photo);
    assert_eq!(images, [format!("data:image/png;base64,{b64}")]);

    let notes = "# Plan\n- ship the release on Friday\n";
    rig.document("notes.md", "text/markdown", notes.as_bytes())
        .await;
    seen_settled(&rig, Who::Owner, 2).await;
    assert_eq!(rig.llm().request_count(), 2);
    let user = rig.llm().last_request().last_user();
    assert!(user.contains("ship the release on Friday"), "{user}");
    assert!(user.contains("notes.md"), "the document is named: {user}");
    rig.stop().await;
}

/// Case 7: The agent draws a chart with a tool and attaches it: the person gets the answer and the
/// file, byte for byte, once. A platform that declares no files out gets the answer alone.
pub async fn file_out<R: Rig>() {
    let dir = tempfile::tempdir().unwrap();
    let shop = shop_with_starts(dir.path());
    let rig = R::start(|c| c.mcp.servers = vec![shop]).await;
    shop_ready(dir.path()).await;
    chart_then_attach(rig.llm(), "sales", "Here is your chart.");
    rig.say(Who::Owner, "chart my sales").await;
    let files_out = R::caps().declared.files_out;
    let seen = seen_settled(&rig, Who::Owner, if files_out { 2 } else { 1 }).await;
    assert_eq!(texts(&seen), ["Here is your chart."]);
    let files: Vec<&Vec<u8>> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::File { bytes, .. } => Some(bytes),
            Seen::Text(_) => None,
        })
        .collect();
    if files_out {
        assert_eq!(files, [&chart("sales")], "one file, the tool's bytes");
    } else {
        assert!(files.is_empty(), "no file on a platform without files out");
    }
    rig.stop().await;
}

const CAPSULE: &str = "## Working on\nMaking the nightly mirror job skip unreachable hosts.\n\n\
## State\nThe skip works on host two; reporting is not written yet.\n\n\
## Decisions\nSkip and report, never abort the whole run.\n\n\
## Pointers\nThe job script is mirror.sh.\n\n\
## Next\nWrite the report line naming the skipped host.\n";

/// Case 10: `Handoff.` after a conversation: a capsule is written from the dialogue, the session
/// closes, and the next session's first message carries the capsule once.
pub async fn handoff<R: Rig>() {
    let rig = R::start(|_| {}).await;
    let lane = LaneKey::new(&rig.lane());
    let store = rig.app().store.clone();
    for (i, text) in [
        "The nightly mirror job fails on the second host.",
        "Make it skip unreachable hosts and report which one.",
    ]
    .into_iter()
    .enumerate()
    {
        rig.say(Who::Owner, text).await;
        seen_settled(&rig, Who::Owner, i + 1).await;
    }
    let old = store.session_current(&lane).await.unwrap().unwrap().id;
    rig.llm().push(Step::Reply(CAPSULE.into()));
    rig.say(Who::Owner, "Handoff.").await;
    let seen = seen_settled(&rig, Who::Owner, 3).await;
    assert_eq!(texts(&seen)[2], ACK, "the person is told");

    let capsule = wait_for("the capsule", WAIT, async || {
        store
            .capsule_latest(&lane)
            .await
            .unwrap()
            .filter(|c| c.status == BuildStatus::Ok)
    })
    .await;
    assert_eq!(capsule.session_id, old);
    assert!(
        capsule.text.contains("## Next\nWrite the report line"),
        "{}",
        capsule.text
    );
    assert_writer_request(&rig.llm().requests()[2], "Make it skip unreachable hosts");
    wait_for(
        "the session to close",
        Duration::from_secs(10),
        async || {
            let s = store
                .session_get(&SessionId::from(old.as_str()))
                .await
                .unwrap()?;
            s.ended_at.map(|_| ())
        },
    )
    .await;

    rig.say(Who::Owner, "Where were we?").await;
    seen_settled(&rig, Who::Owner, 4).await;
    rig.say(Who::Owner, "And then?").await;
    seen_settled(&rig, Who::Owner, 5).await;
    let reqs = rig.llm().requests();
    assert_eq!(reqs.len(), 5, "two turns, the writer, two turns");
    assert_capsule_received_once(
        &reqs[3],
        "Where were we?",
        "Write the report line naming the skipped host",
        &reqs[4],
        "And then?",
    );
    rig.stop().await;
}
