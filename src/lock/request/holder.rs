//! Who holds a lock: the holder info stored beside each grant (host, pid,
//! command, user, CI job, the other locks of its set).

use serde::{Deserialize, Serialize};

/// Who holds a lock, as stored beside the grant (never the token).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct HolderInfo {
    /// The holder's host name.
    pub host: String,
    /// The holder's process id.
    pub pid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The holder's command line, if given (`rlock` stores it redacted).
    pub cmd: Option<String>,
    /// The login name of the holder's process (USER, else LOGNAME, else
    /// the password database's name for its uid); "" in holder info
    /// stored by rlock before 0.x (the field did not exist).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user: String,
    /// The CI job the holder runs in, when the environment names one (see
    /// [`ci_job`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci: Option<String>,
    /// The other locks taken together with this one (`rlock exec a b --
    /// ...`), sorted; empty for a lock taken alone. See [`crate::lock::set`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<String>,
}

impl HolderInfo {
    /// This process on this host, optionally running `cmd`.
    pub fn current(cmd: Option<String>) -> HolderInfo {
        HolderInfo {
            host: hostname(),
            pid: std::process::id(),
            cmd,
            user: login_name(),
            ci: ci_job(&|k| std::env::var(k).ok().filter(|v| !v.is_empty())),
            set: Vec::new(),
        }
    }
}

/// The login name of this process: USER, else LOGNAME, else the password
/// database's entry for its real uid, else "".
///
/// The password database is read as /etc/passwd first, directly: the
/// C library's lookup sets up NSS for it (two connects to nscd's socket,
/// nsswitch.conf) on every rlock start where USER and LOGNAME are unset
/// (cron, systemd units, containers). Only a uid /etc/passwd does not list
/// goes through NSS (LDAP, sssd, systemd's dynamic users).
pub(crate) fn login_name() -> String {
    for k in ["USER", "LOGNAME"] {
        if let Ok(v) = std::env::var(k)
            && !v.is_empty()
            && !v.chars().any(char::is_control)
        {
            return v;
        }
    }
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    if let Ok(text) = std::fs::read("/etc/passwd")
        && let Some(name) = passwd_name(&text, uid)
    {
        return name;
    }
    let mut buf = vec![0u8; 4096];
    // SAFETY: passwd is a plain C struct of pointers and integers, for
    // which all zeroes is a valid value (null pointers, 0).
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: pwd, buf and out are valid for the call; getpwuid_r writes
    // only into them, and on success out points to pwd, whose pw_name
    // points into buf (NUL-terminated).
    let rc = unsafe {
        libc::getpwuid_r(
            libc::getuid(),
            &mut pwd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut out,
        )
    };
    if rc != 0 || out.is_null() || pwd.pw_name.is_null() {
        return String::new();
    }
    // SAFETY: see above.
    unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) }
        .to_string_lossy()
        .into_owned()
}

/// The name of `uid`'s first entry in `text`, a file in passwd(5) format,
/// as the C library's "files" source finds it: lines `name:pw:uid:...`,
/// NIS compat lines (`+...`, `-...`) and malformed ones skipped; None for
/// a uid it does not list.
fn passwd_name(text: &[u8], uid: u32) -> Option<String> {
    text.split(|&b| b == b'\n').find_map(|line| {
        let mut fields = line.split(|&b| b == b':');
        let name = fields.next()?;
        let _password = fields.next()?;
        let id = std::str::from_utf8(fields.next()?).ok()?;
        (!name.is_empty()
            && !name.starts_with(b"+")
            && !name.starts_with(b"-")
            && id.parse::<u32>() == Ok(uid))
        .then(|| String::from_utf8_lossy(name).into_owned())
    })
}

/// The CI job this process runs in, as one line, when the environment
/// (read through `var`, which gives None for unset or empty) names one:
/// - GitHub Actions (GITHUB_ACTIONS=true): `github <GITHUB_REPOSITORY> run
///   <GITHUB_RUN_ID> job <GITHUB_JOB>`;
/// - GitLab CI (GITLAB_CI): `gitlab <CI_PROJECT_PATH> job <CI_JOB_ID>`;
/// - Buildkite (BUILDKITE=true): `buildkite <BUILDKITE_PIPELINE_SLUG>
///   build <BUILDKITE_BUILD_NUMBER> job <BUILDKITE_JOB_ID>`;
/// - CircleCI (CIRCLECI=true): `circleci <CIRCLE_PROJECT_REPONAME> build
///   <CIRCLE_BUILD_NUM> job <CIRCLE_JOB>`;
/// - Jenkins (JENKINS_URL): `jenkins <JOB_NAME> build <BUILD_NUMBER>`.
///
/// Parts the environment leaves out are left out; control characters
/// become spaces, and the whole is redacted as status redacts text (a
/// URL's password never shows).
pub fn ci_job(var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let parts: &[(&str, &str)] = if var("GITHUB_ACTIONS").is_some() {
        &[
            ("github", "GITHUB_REPOSITORY"),
            ("run", "GITHUB_RUN_ID"),
            ("job", "GITHUB_JOB"),
        ]
    } else if var("GITLAB_CI").is_some() {
        &[("gitlab", "CI_PROJECT_PATH"), ("job", "CI_JOB_ID")]
    } else if var("BUILDKITE").is_some() {
        &[
            ("buildkite", "BUILDKITE_PIPELINE_SLUG"),
            ("build", "BUILDKITE_BUILD_NUMBER"),
            ("job", "BUILDKITE_JOB_ID"),
        ]
    } else if var("CIRCLECI").is_some() {
        &[
            ("circleci", "CIRCLE_PROJECT_REPONAME"),
            ("build", "CIRCLE_BUILD_NUM"),
            ("job", "CIRCLE_JOB"),
        ]
    } else if var("JENKINS_URL").is_some() {
        &[("jenkins", "JOB_NAME"), ("build", "BUILD_NUMBER")]
    } else {
        return None;
    };
    let mut out = parts[0].0.to_string();
    for (i, (label, k)) in parts.iter().enumerate() {
        if let Some(v) = var(k) {
            let v: String = v
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            if i > 0 {
                out.push(' ');
                out.push_str(label);
            }
            out.push(' ');
            out.push_str(&v);
        }
    }
    Some(crate::redact::redact_text(&out))
}

pub(crate) fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is valid for buf.len() bytes; gethostname NUL-terminates
    // on success (and we cap at the buffer anyway).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::passwd_name;

    const PASSWD: &[u8] = b"root:x:0:0:root:/root:/bin/bash\n\
        +nis:x:1000:1000::/:/bin/sh\n\
        broken line\n\
        :x:1000:1000::/:/bin/sh\n\
        ann:x:1000:1000:Ann,,,:/home/ann:/bin/bash\n\
        alias:x:1000:1000::/home/ann:/bin/bash\n\
        bob:x:01001:1001::/home/bob:/bin/sh";

    #[test]
    fn passwd_gives_the_first_name_listed_for_the_uid() {
        assert_eq!(passwd_name(PASSWD, 0).as_deref(), Some("root"));
        // Compat and nameless lines are skipped; the first real entry wins.
        assert_eq!(passwd_name(PASSWD, 1000).as_deref(), Some("ann"));
        // The last line needs no newline; a uid is a number, not text.
        assert_eq!(passwd_name(PASSWD, 1001).as_deref(), Some("bob"));
        assert_eq!(passwd_name(PASSWD, 4242), None);
        assert_eq!(passwd_name(b"", 0), None);
    }
}
