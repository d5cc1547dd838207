//! Untrusted files are decoded in a child process, never in the daemon: a [`Decoder`] starts
//! `herald decode` (the worker in `worker.rs`) once per file, with its address space, CPU time
//! and core size capped before it runs (`pre_exec`), an empty environment (no secret reaches
//! it), a wall-clock deadline and a cap on the answer it may write. The worker refuses what is
//! over `[media]`'s caps itself (inflated bytes, pages, pixels); a crash, a timeout or a limit
//! hit ends that child only, and each becomes one `MediaError` sentence for the person.
//!
//! The worker is this very executable: the daemon's own binary (through `/proc/self/exe`, so a
//! binary replaced on disk during an upgrade still runs the matching worker), or for a test or
//! benchmark binary the `herald` beside its `deps/` or `examples/` folder. There is no
//! in-process fallback: without a worker, a file is not read.

pub mod image;
pub mod office;
pub mod pdf_scan;
pub mod wire;
pub mod worker;

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;

use crate::config::Config;

use super::MediaError;
pub use wire::{Job, JobKind, Limits, Outcome, Refusal, WireFormat};

/// Workers running at once; more files wait their turn (each may use `decode_memory_mb`).
const WORKERS_AT_ONCE: usize = 4;
/// What the worker may write to stderr that is kept (the way it died, for the sentence).
const STDERR_KEPT: u64 = 4096;

/// Starts decode workers under the configured caps.
#[derive(Clone)]
pub struct Decoder {
    program: Option<PathBuf>,
    args: Vec<OsString>,
    limits: Limits,
    memory_mb: u64,
    timeout: Duration,
    permits: Arc<Semaphore>,
}

impl Decoder {
    pub fn from_config(config: &Config) -> Decoder {
        let m = &config.media;
        let limits = Limits {
            max_unpacked_bytes: m.max_unpacked_bytes,
            max_pages: m.max_pages,
            max_image_pixels: m.max_image_pixels,
            max_chars: m.document_chars,
        };
        Decoder::new(
            worker_exe(),
            vec!["decode".into()],
            limits,
            m.decode_memory_mb,
            Duration::from_secs(m.decode_timeout_secs),
        )
    }

    /// A decoder that runs `program args…` as its worker (tests point it at a stand-in).
    pub fn new(
        program: Option<PathBuf>,
        args: Vec<OsString>,
        limits: Limits,
        memory_mb: u64,
        timeout: Duration,
    ) -> Decoder {
        Decoder {
            program,
            args,
            limits,
            memory_mb,
            timeout,
            permits: Arc::new(Semaphore::new(WORKERS_AT_ONCE)),
        }
    }

    /// The same decoder keeping at most `max_chars` of a document's text (`web_fetch`'s
    /// `web_tools.max_chars` rather than `media.document_chars`).
    pub fn with_max_chars(mut self, max_chars: usize) -> Decoder {
        self.limits.max_chars = max_chars;
        self
    }

    /// Decodes `bytes` in a worker: `Ok` with a document, `NotRead`, or an image's size
    /// (never `Refused`: a refusal is the matching `MediaError`).
    pub async fn decode(
        &self,
        kind: JobKind,
        bytes: &[u8],
        mime: Option<&str>,
        name: Option<&str>,
    ) -> Result<Outcome, MediaError> {
        let Some(program) = &self.program else {
            return Err(MediaError::NoDecoder(
                "no herald executable was found beside this program".into(),
            ));
        };
        let job = Job {
            kind,
            mime: mime.map(str::to_string),
            name: name.map(str::to_string),
            limits: self.limits,
            len: bytes.len() as u64,
        };
        let _permit = self.permits.acquire().await;
        let run = self.run(program, &job, bytes);
        let outcome = match tokio::time::timeout(self.timeout, run).await {
            Ok(result) => result?,
            Err(_) => {
                return Err(MediaError::DecodeTimeout {
                    secs: self.timeout.as_secs(),
                })
            }
        };
        match outcome {
            Outcome::Refused(r) => Err(refused(r)),
            ok => Ok(ok),
        }
    }

    /// One worker from start to exit; dropped at the deadline, which kills it.
    async fn run(&self, program: &PathBuf, job: &Job, bytes: &[u8]) -> Result<Outcome, MediaError> {
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(&self.args)
            .env_clear()
            .env("HERALD_DECODE_MEMORY_MB", self.memory_mb.to_string())
            .env(
                "HERALD_DECODE_CPU_SECS",
                self.timeout.as_secs().max(1).to_string(),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let memory = self.memory_mb.saturating_mul(1024 * 1024);
        let cpu = self.timeout.as_secs().max(1);
        // SAFETY: between fork and exec only setrlimit(2) runs, which is async-signal-safe;
        // nothing is allocated and no lock is taken.
        unsafe {
            cmd.pre_exec(move || {
                use rlimit::Resource;
                rlimit::setrlimit(Resource::AS, memory, memory)?;
                rlimit::setrlimit(Resource::CPU, cpu, cpu + 1)?;
                rlimit::setrlimit(Resource::CORE, 0, 0)?;
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| MediaError::NoDecoder(e.to_string()))?;
        let (Some(mut stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(MediaError::Crashed("the reader had no pipes".into()));
        };
        let mut header = serde_json::to_vec(job).unwrap_or_default();
        header.push(b'\n');
        // A worker that dies early closes its end: the write fails and the exit tells why.
        let write = async move {
            let _ = stdin.write_all(&header).await;
            let _ = stdin.write_all(bytes).await;
        };
        let cap = answer_cap(self.limits.max_chars);
        let read_out = async move {
            let mut out = Vec::new();
            let _ = stdout.take(cap + 1).read_to_end(&mut out).await;
            out
        };
        let read_err = async move {
            let mut kept = Vec::new();
            let _ = (&mut stderr).take(STDERR_KEPT).read_to_end(&mut kept).await;
            let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
            kept
        };
        let ((), out, err) = tokio::join!(write, read_out, read_err);
        if out.len() as u64 > cap {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(MediaError::Crashed("its answer was too long".into()));
        }
        let status = child
            .wait()
            .await
            .map_err(|e| MediaError::Crashed(format!("the reader was lost: {e}")))?;
        if status.success() {
            return serde_json::from_slice(&out)
                .map_err(|_| MediaError::Crashed("the reader gave no answer".into()));
        }
        Err(died(status, &String::from_utf8_lossy(&err), self))
    }
}

/// Bytes of JSON the worker may answer with: the text at its worst escaping, and room.
fn answer_cap(max_chars: usize) -> u64 {
    (max_chars as u64).saturating_mul(6) + 64 * 1024
}

/// The sentence for a worker that did not exit cleanly.
fn died(status: std::process::ExitStatus, stderr: &str, d: &Decoder) -> MediaError {
    if stderr.contains("memory allocation of")
        || status.code() == Some(i32::from(worker::OUT_OF_MEMORY))
    {
        return MediaError::DecodeMemory { mb: d.memory_mb };
    }
    if stderr.contains("overflowed its stack") {
        return MediaError::Crashed("it nests too deeply (stack overflow)".into());
    }
    match status.signal() {
        Some(libc::SIGXCPU) => MediaError::DecodeTimeout {
            secs: d.timeout.as_secs(),
        },
        Some(libc::SIGKILL) => MediaError::Crashed("it was killed".into()),
        Some(libc::SIGSEGV) | Some(libc::SIGBUS) => {
            MediaError::Crashed("it crashed (a memory fault)".into())
        }
        Some(libc::SIGABRT) => MediaError::Crashed("it aborted".into()),
        Some(sig) => MediaError::Crashed(format!("it died of signal {sig}")),
        None => MediaError::Crashed(format!(
            "it exited with code {}",
            status.code().unwrap_or(-1)
        )),
    }
}

fn refused(r: Refusal) -> MediaError {
    match r {
        Refusal::Malformed { why } => MediaError::Corrupt(why),
        Refusal::Unpacked { max } => MediaError::Unpacked { max },
        Refusal::TooManyPages { pages, max } => MediaError::TooManyPages { pages, max },
        Refusal::ImageTooLarge { width, height, max } => {
            MediaError::ImageTooLarge { width, height, max }
        }
    }
}

/// The executable that serves `herald decode`: see the module's header.
pub fn worker_exe() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let stem = exe.file_name()?.to_str()?;
    if stem == "herald" || stem == "herald (deleted)" {
        let own = PathBuf::from("/proc/self/exe");
        return Some(if own.exists() { own } else { exe });
    }
    let dir = exe.parent()?;
    if matches!(dir.file_name()?.to_str()?, "deps" | "examples") {
        let beside = dir.parent()?.join("herald");
        if beside.is_file() {
            return Some(beside);
        }
    }
    None
}
