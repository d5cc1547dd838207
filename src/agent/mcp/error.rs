//! Why an MCP server could not be used: one enum for reaching it (each variant one line an
//! operator can act on, shown by the log, `herald tools list` and `herald doctor`) and one for
//! a tool withheld from the model. They become text only where they are shown.

/// A step of reaching a server that failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("could not start {program:?}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the started process has no {0} pipe")]
    NoPipe(&'static str),
    #[error("building the HTTP client: {0}")]
    HttpClient(#[source] reqwest::Error),
    #[error("headers: {0}")]
    Header(String),
    #[error("initialize failed: {0}")]
    Initialize(String),
    #[error("tools/list failed: {0}")]
    ListTools(String),
    #[error("no answer to initialize and tools/list within {0} s")]
    Timeout(u64),
    #[error("the process exited ({0}) before it was ready")]
    Exited(std::process::ExitStatus),
}

/// A failed connection: the step that failed, then what helps the operator (a hint about the
/// legacy HTTP+SSE transport, the server's last stderr line).
#[derive(Debug, thiserror::Error)]
#[error("{cause}{context}")]
pub struct Unreachable {
    #[source]
    pub cause: ConnectError,
    pub context: String,
}

/// Why a listed tool is not offered to the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolWithheld {
    /// Its description, schema or name carries something the screen stops (text from a third
    /// party that would land in the prompt).
    #[error("its description or schema carries {0}")]
    Screened(String),
}

impl From<ConnectError> for Unreachable {
    fn from(cause: ConnectError) -> Unreachable {
        Unreachable {
            cause,
            context: String::new(),
        }
    }
}
