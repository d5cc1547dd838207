//! A real Dovecot IMAP server for one test: its own config, passwd file, maildirs, base and
//! state directories in a temp dir, listening on a free loopback port, plain LOGIN allowed
//! (`ssl = no`, Dovecot 2.3's `disable_plaintext_auth = no`). Runs in the foreground as our
//! child (`dovecot -F`) and is killed when dropped. As root (CI) the mail files belong to the
//! `dovecot` user and logins run as `dovenull`, which the Debian package creates; as anyone
//! else, everything runs as that user.
//!
//! `scripts/mail.sh` (sourced by `scripts/test`) installs `dovecot-imapd` when it is missing.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// Where the Debian package puts the binary.
const DOVECOT: &str = "/usr/sbin/dovecot";

pub struct Dovecot {
    child: Child,
    dir: TempDir,
    pub port: u16,
}

impl Dovecot {
    /// Starts Dovecot with these (login, password) users; each has an INBOX and a Sent folder.
    pub fn start(users: &[(&str, &str)]) -> Dovecot {
        Dovecot::start_with(users, "")
    }

    /// As [`Dovecot::start`], with `extra` lines at the end of its config.
    pub fn start_with(users: &[(&str, &str)], extra: &str) -> Dovecot {
        let bin = which_dovecot().unwrap_or_else(|| {
            panic!(
                "dovecot is not installed: run scripts/test (it installs dovecot-imapd through \
                 scripts/mail.sh), or `apt-get install dovecot-imapd`"
            )
        });
        let dir = tempfile::Builder::new()
            .prefix("herald-dovecot")
            .tempdir()
            .expect("temp dir");
        let root = dir.path();
        for sub in ["run", "state", "home"] {
            std::fs::create_dir_all(root.join(sub)).expect("dovecot dirs");
        }
        let passwd: String = users
            .iter()
            .map(|(u, p)| format!("{u}:{{PLAIN}}{p}\n"))
            .collect();
        std::fs::write(root.join("passwd"), passwd).expect("passwd file");
        let port = free_port();
        let (login_user, mail_user) = users_to_run_as();
        std::fs::write(
            root.join("dovecot.conf"),
            config(root, port, &login_user, &mail_user) + extra,
        )
        .expect("dovecot.conf");
        if is_root() {
            // The temp dir is 0700 and root's: the mail user must reach its home under it.
            chmod(root, 0o755);
            let status = Command::new("chown")
                .args(["-R", &format!("{mail_user}:{mail_user}")])
                .arg(root.join("home"))
                .status()
                .expect("chown");
            assert!(status.success(), "chown of the dovecot home failed");
        }
        let child = Command::new(bin)
            .args(["-F", "-c"])
            .arg(root.join("dovecot.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("dovecot starts");
        let mut d = Dovecot { child, dir, port };
        d.wait_listening();
        d
    }

    /// Kills the server (every open connection drops) and starts it again on the same port,
    /// config and mail.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let bin = which_dovecot().expect("dovecot was installed a moment ago");
        self.child = Command::new(bin)
            .args(["-F", "-c"])
            .arg(self.dir.path().join("dovecot.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("dovecot starts again");
        self.wait_listening();
    }

    fn wait_listening(&mut self) {
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("dovecot exited ({status}); log:\n{}", self.log());
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "dovecot did not listen within 20 s; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last lines of Dovecot's own log (for a failure message).
    pub fn log(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("dovecot.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Dovecot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(root: &Path, port: u16, login_user: &str, mail_user: &str) -> String {
    let r = root.display();
    format!(
        r#"base_dir = {r}/run
state_dir = {r}/state
log_path = {r}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_login_user = {login_user}
default_internal_user = {mail_user}
first_valid_uid = 1
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {r}/passwd
}}
userdb {{
  driver = static
  args = uid={mail_user} gid={mail_user} home={r}/home/%u
}}
mail_location = maildir:~/Maildir
namespace inbox {{
  inbox = yes
  mailbox Sent {{
    special_use = \Sent
    auto = subscribe
  }}
  mailbox Done {{
    auto = subscribe
  }}
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
  chroot =
}}
service anvil {{
  chroot =
}}
# The load tests log in from many clients at once (Dovecot's default is 10 per user and IP).
protocol imap {{
  mail_max_userip_connections = 1000
}}
"#
    )
}

fn which_dovecot() -> Option<PathBuf> {
    if Path::new(DOVECOT).exists() {
        return Some(PathBuf::from(DOVECOT));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("dovecot"))
            .find(|p| p.exists())
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// (login process user, mail user): Debian's `dovenull` and `dovecot` as root, else ourselves.
fn users_to_run_as() -> (String, String) {
    if is_root() {
        return ("dovenull".into(), "dovecot".into());
    }
    let me = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| {
            Command::new("id")
                .arg("-un")
                .output()
                .ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        })
        .expect("the current user's name");
    (me.clone(), me)
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("its address").port()
}
