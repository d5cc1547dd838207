//! Pure domain types shared by every layer: events, lanes, messages, cron jobs and targets.
//!
//! Nothing here does I/O or names a platform crate or sqlx; adapters and the store translate
//! to and from these types at their edges.

mod amount;
mod cap;
mod capsule_status;
pub mod cron;
mod event;
mod lane;
mod media;
mod message;
mod payer;
mod platform;
mod session_id;
mod stored_event;

pub use amount::{Amount, NANOS_PER_UNIT};
pub use cap::Cap;
pub use capsule_status::BuildStatus;
pub use event::{ChatType, Control, MessageEvent, MessageKind, Origin};
pub use lane::{LaneKey, MAX_LANE_KEY_LEN};
pub use media::{describe_all, short_id, Attachment, MediaKind, MediaSource, SHORT_ID};
pub use message::{Role, ToolCall};
pub use payer::Payer;
pub use platform::{Person, Platform, UnknownPlatform, MAX_PLATFORM_LEN};
pub use session_id::SessionId;
