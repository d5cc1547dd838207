//! The session id as a column: `domain::SessionId` decodes as text on SQLite and Postgres, so
//! rows read one back with no `String` in between (it binds as text through `db::Arg`).
//!
//! The domain stays free of sqlx; the impls live at the store edge, delegating to `str`/`String`.

use sqlx::error::BoxDynError;
use sqlx::{Database, Decode, Type};

use crate::domain::SessionId;

impl<DB: Database> Type<DB> for SessionId
where
    String: Type<DB>,
{
    fn type_info() -> DB::TypeInfo {
        <String as Type<DB>>::type_info()
    }

    fn compatible(ty: &DB::TypeInfo) -> bool {
        <String as Type<DB>>::compatible(ty)
    }
}

impl<'r, DB: Database> Decode<'r, DB> for SessionId
where
    String: Decode<'r, DB>,
{
    fn decode(value: <DB as Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
        Ok(SessionId::from(<String as Decode<'r, DB>>::decode(value)?))
    }
}
