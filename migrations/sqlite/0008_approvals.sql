-- A tool call waiting for a person's word, and what became of it. The row is the wait: a
-- restart finds it and resumes (or, past its deadline, denies), a button press on any replica
-- answers it once (the status moves out of `pending` in one conditional update), and an
-- approved call is run at most once (`approved` -> `running` -> `done` with its result, which
-- a retried turn reads back instead of calling again). A call is named across retries of its
-- turn by (lane, inbox id, position in the turn, hash of tool and arguments).
CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    lane TEXT NOT NULL,
    inbox_id INTEGER NOT NULL,
    call_index INTEGER NOT NULL,
    call_hash TEXT NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    person TEXT NOT NULL,
    platform TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT,
    status TEXT NOT NULL,
    decided_by TEXT,
    decided_at INTEGER,
    deadline INTEGER NOT NULL,
    prompt_message_id TEXT,
    result TEXT,
    created_at INTEGER NOT NULL,
    UNIQUE (lane, inbox_id, call_index, call_hash)
);
CREATE INDEX approvals_pending ON approvals (status, lane);
