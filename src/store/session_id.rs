//! The session id as a column: `domain::SessionId` binds and decodes as text on SQLite and
//! Postgres, so queries take `&SessionId` and rows read one back with no `String` in between.
//!
//! The domain stays free of sqlx; the impls live at the store edge, delegating to `str`/`String`.

use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::{Database, Decode, Encode, Type};

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

impl<'q, DB: Database> Encode<'q, DB> for SessionId
where
    for<'a> &'a str: Encode<'q, DB>,
{
    fn encode_by_ref(
        &self,
        buf: &mut <DB as Database>::ArgumentBuffer,
    ) -> Result<IsNull, BoxDynError> {
        <&str as Encode<'q, DB>>::encode(self.as_str(), buf)
    }

    fn size_hint(&self) -> usize {
        self.len()
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
