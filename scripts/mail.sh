# Sourced by scripts/test (after scripts/postgres.sh, for log and apt_install): makes sure the
# real IMAP server the email tests run against is installed: Dovecot (`dovecot-imapd`, which
# brings `dovecot-core`). test-support/src/fake_email/dovecot.rs starts a throwaway instance per
# test with its own config in a temp dir; the package's own service is not used. Installs only
# what is missing. (The SMTP side is a small server in test-support: nothing to install.)

ensure_mail_servers() {
    if [ ! -x /usr/sbin/dovecot ] && ! command -v dovecot >/dev/null 2>&1; then
        log "installing dovecot-imapd (the email tests' IMAP server)"
        apt_install dovecot-imapd
    fi
}
